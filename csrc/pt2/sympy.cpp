#include "pt2/sympy.h"

#include <array>
#include <cctype>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "common/error.h"

namespace luminal::pt2 {

SympyExpr SympyExpr::integer(int64_t value) {
  SympyExpr e;
  e.kind = Kind::Integer;
  e.value = value;
  return e;
}

SympyExpr SympyExpr::symbol(std::string name) {
  SympyExpr e;
  e.kind = Kind::Symbol;
  e.name = std::move(name);
  return e;
}

SympyExpr SympyExpr::call(std::string name, std::vector<SympyExpr> args) {
  SympyExpr e;
  e.kind = Kind::Call;
  e.name = std::move(name);
  e.args = std::move(args);
  return e;
}

namespace {

// Identifiers that sympy prints bare but that are constants, not symbols.
constexpr std::array<std::string_view, 15> kBareConstants = {
    "oo", "zoo", "nan",        "int_oo", "true",     "false",           "True", "False", "pi",
    "E",  "I",   "EulerGamma", "Half",   "Infinity", "NegativeInfinity"};

bool is_bare_constant(std::string_view name) {
  for (const std::string_view constant : kBareConstants) {
    if (constant == name) return true;
  }
  return false;
}

std::optional<int64_t> named_integer(std::string_view name) {
  if (name == "Zero") return 0;
  if (name == "One") return 1;
  if (name == "NegativeOne") return -1;
  return std::nullopt;
}

// Untrusted input: bound the recursion so a pathological string cannot overflow the stack.
constexpr int kMaxDepth = 512;

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  SympyExpr parse_all() {
    SympyExpr expr = parse_expr(0);
    skip_space();
    if (!at_end()) fail_here("expected end of expression");
    return expr;
  }

 private:
  // One call argument: a string literal is only meaningful as Symbol's name, so remember it.
  struct CallArg {
    SympyExpr expr;
    bool is_string = false;
  };

  SympyExpr parse_expr(int depth) {
    if (depth > kMaxDepth) fail_here("expression nested too deeply");
    skip_space();
    if (at_end()) fail_here("expected an expression");
    const char c = peek();
    if (c == '-' || c == '+') return parse_signed(depth);
    if (is_digit(c)) return SympyExpr::integer(parse_integer(false));
    if (is_identifier_start(c)) return parse_named(depth);
    fail_here("expected an integer, a name or a call");
  }

  SympyExpr parse_signed(int depth) {
    const bool negative = peek() == '-';
    ++pos_;
    skip_space();
    if (!at_end() && is_digit(peek())) return SympyExpr::integer(parse_integer(negative));
    SympyExpr operand = parse_expr(depth + 1);
    if (!negative) return operand;
    if (operand.kind == SympyExpr::Kind::Integer &&
        operand.value != std::numeric_limits<int64_t>::min()) {
      return SympyExpr::integer(-operand.value);
    }
    return SympyExpr::call("Mul", {SympyExpr::integer(-1), std::move(operand)});
  }

  SympyExpr parse_named(int depth) {
    const size_t start = pos_;
    std::string name = parse_identifier();
    skip_space();
    if (at_end() || peek() != '(') return bare_name(std::move(name));
    std::vector<CallArg> args = parse_call_args(depth);
    return make_call(std::move(name), std::move(args), start);
  }

  static SympyExpr bare_name(std::string name) {
    if (const auto value = named_integer(name)) return SympyExpr::integer(*value);
    if (is_bare_constant(name)) return SympyExpr::call(std::move(name));
    return SympyExpr::symbol(std::move(name));
  }

  SympyExpr make_call(std::string name, std::vector<CallArg> args, size_t start) {
    if (name == "Symbol" || name == "Dummy") {
      if (args.size() != 1 || !args[0].is_string) {
        fail_at(start, name + "(...) expects one quoted name");
      }
      return SympyExpr::symbol(std::move(args[0].expr.name));
    }
    if (name == "Integer") {
      if (args.size() != 1 || args[0].is_string || args[0].expr.kind != SympyExpr::Kind::Integer) {
        fail_at(start, "Integer(...) expects one integer literal");
      }
      return std::move(args[0].expr);
    }
    if (const auto value = named_integer(name)) {
      if (!args.empty()) fail_at(start, name + "() takes no arguments");
      return SympyExpr::integer(*value);
    }
    std::vector<SympyExpr> exprs;
    exprs.reserve(args.size());
    for (CallArg& arg : args) exprs.push_back(std::move(arg.expr));
    return SympyExpr::call(std::move(name), std::move(exprs));
  }

  // Parses "(arg, arg, key=value)" after a function name; keyword arguments are dropped.
  std::vector<CallArg> parse_call_args(int depth) {
    expect('(');
    std::vector<CallArg> args;
    skip_space();
    if (consume(')')) return args;
    while (true) {
      skip_space();
      if (!at_end() && is_identifier_start(peek()) && keyword_follows()) {
        parse_identifier();
        skip_space();
        expect('=');
        parse_call_arg(depth);  // the value (True, 53, '...') does not matter to us
      } else {
        args.push_back(parse_call_arg(depth));
      }
      skip_space();
      if (consume(')')) return args;
      if (!consume(',')) fail_here("expected ',' or ')'");
    }
  }

  CallArg parse_call_arg(int depth) {
    skip_space();
    if (!at_end() && (peek() == '\'' || peek() == '"')) {
      return CallArg{SympyExpr::symbol(parse_string()), true};
    }
    return CallArg{parse_expr(depth + 1), false};
  }

  // True when the identifier at pos_ is followed by '=' (and not '=='): a keyword argument.
  bool keyword_follows() const {
    size_t look = pos_;
    while (look < text_.size() && is_identifier_char(text_[look])) ++look;
    while (look < text_.size() && std::isspace(static_cast<unsigned char>(text_[look]))) ++look;
    return look < text_.size() && text_[look] == '=' &&
           !(look + 1 < text_.size() && text_[look + 1] == '=');
  }

  int64_t parse_integer(bool negative) {
    const size_t start = pos_;
    // Magnitude limit: 2^63 for negative numbers, 2^63 - 1 otherwise.
    const uint64_t limit =
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
    uint64_t magnitude = 0;
    while (!at_end() && is_digit(peek())) {
      const uint64_t digit = static_cast<uint64_t>(peek() - '0');
      if (magnitude > (limit - digit) / 10) fail_at(start, "integer literal out of int64 range");
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (!at_end() && (is_identifier_char(peek()) || peek() == '.')) {
      fail_here("expected an integer literal (floats and suffixes are not integers)");
    }
    if (!negative) return static_cast<int64_t>(magnitude);
    if (magnitude == static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1) {
      return std::numeric_limits<int64_t>::min();
    }
    return -static_cast<int64_t>(magnitude);
  }

  std::string parse_identifier() {
    const size_t start = pos_;
    while (!at_end() && is_identifier_char(peek())) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  std::string parse_string() {
    const size_t start = pos_;
    const char quote = text_[pos_++];
    std::string out;
    while (!at_end() && peek() != quote) {
      if (peek() == '\\') {
        ++pos_;
        if (at_end()) break;
      }
      out += text_[pos_++];
    }
    if (at_end()) fail_at(start, "unterminated string literal");
    ++pos_;  // closing quote
    return out;
  }

  void expect(char c) {
    skip_space();
    if (!consume(c)) fail_here(std::string("expected '") + c + "'");
  }

  bool consume(char c) {
    if (at_end() || peek() != c) return false;
    ++pos_;
    return true;
  }

  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(peek()))) ++pos_;
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_identifier_start(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
  }
  static bool is_identifier_char(char c) { return is_identifier_start(c) || is_digit(c); }

  [[noreturn]] void fail_here(const std::string& what) const { fail_at(pos_, what); }

  [[noreturn]] void fail_at(size_t offset, const std::string& what) const {
    const std::string found = offset >= text_.size() ? std::string("end of input")
                                                     : str_cat("'", text_.substr(offset, 16), "'");
    fail("sympy expression \"", text_, "\": ", what, " at offset ", offset, ", found ", found);
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace

// Untrusted input: a parsed node takes some 70 bytes for as little as 2 of text ("0,"), so a 50 MiB
// expression would take gigabytes. The sizes torch.export writes are a few hundred bytes at most.
constexpr size_t kMaxExpressionBytes = 64 * 1024;

SympyExpr parse_sympy(const std::string& text) {
  if (text.size() > kMaxExpressionBytes) {
    fail("sympy expression \"", text.substr(0, 32), "...\" is ", text.size(), " bytes long, more than the ",
         kMaxExpressionBytes, " this parser reads");
  }
  return Parser(text).parse_all();
}

std::string to_string(const SympyExpr& e) {
  switch (e.kind) {
    case SympyExpr::Kind::Integer: return std::to_string(e.value);
    case SympyExpr::Kind::Symbol: return e.name;
    case SympyExpr::Kind::Call: break;
  }
  if (e.args.empty() && is_bare_constant(e.name)) return e.name;
  std::string out = e.name + "(";
  for (size_t i = 0; i < e.args.size(); ++i) {
    if (i > 0) out += ", ";
    out += to_string(e.args[i]);
  }
  return out + ")";
}

bool operator==(const SympyExpr& a, const SympyExpr& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case SympyExpr::Kind::Integer: return a.value == b.value;
    case SympyExpr::Kind::Symbol: return a.name == b.name;
    case SympyExpr::Kind::Call: return a.name == b.name && a.args == b.args;
  }
  return false;
}

}  // namespace luminal::pt2
