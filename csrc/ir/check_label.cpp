#include "ir/check_label.h"

#include <string_view>
#include <utility>

#include "common/error.h"

namespace luminal::ir {

namespace {

void replace_all(std::string& text, std::string_view from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

bool has_op_placeholders(const std::string& label) {
  return label.find("{op}") != std::string::npos || label.find("{target}") != std::string::npos ||
         label.find("{node}") != std::string::npos;
}

}  // namespace

std::string user_op_name(const std::string& target) {
  std::string name = target;
  if (const size_t dot = name.find('.'); dot != std::string::npos && name.rfind('.') != dot) {
    name = name.substr(dot + 1, name.rfind('.') - dot - 1);  // namespace.op.overload -> op
  }
  while (!name.empty() && name.front() == '_') name.erase(0, 1);
  constexpr std::string_view kForwardOnly = "_forward_only";
  if (name.size() > kForwardOnly.size() && name.compare(name.size() - kForwardOnly.size(), kForwardOnly.size(),
                                                        kForwardOnly) == 0) {
    name.resize(name.size() - kForwardOnly.size());
  }
  return name.empty() ? target : name;
}

std::string index_check_label(const std::string& input, bool wrap_negative) {
  const std::string which = input.empty() ? std::string() : input + ", ";
  return str_cat("{op}: index ", wrap_negative ? "{index}" : "{value}", " is out of bounds: valid range ",
                 wrap_negative ? "[-{bound}, {bound})" : "[0, {bound})", " (", which, "{target}, node {node})");
}

namespace {

// Names come from the archive: braces in them must not read as placeholders later.
std::string inert(std::string text) {
  for (char& c : text) {
    if (c == '{') c = '(';
    if (c == '}') c = ')';
  }
  return text;
}

}  // namespace

Expr bind_check_labels(const Expr& e, const CheckSite& site) {
  if (!contains_op(e, ExprOp::CheckIndex)) return e;
  const std::string op = inert(user_op_name(site.target)), target = inert(site.target), node = inert(site.node);
  return transform(e, [&](const Expr& original, const std::vector<Expr>& args) -> Expr {
    if (original->op != ExprOp::CheckIndex) return nullptr;
    std::string label = original->symbol.empty() ? index_check_label("", false) : original->symbol;
    if (!has_op_placeholders(label)) return nullptr;
    replace_all(label, "{op}", op);
    replace_all(label, "{target}", target);
    replace_all(label, "{node}", node);
    ExprNode relabelled = *original;
    relabelled.symbol = std::move(label);
    return check_like(relabelled, args[0], args[1], original->masked ? args[2] : nullptr);
  });
}

std::string check_failure_message(const std::string& label, int64_t value, int64_t bound, const std::string& origin) {
  if (label.empty()) {
    return str_cat("index ", value, " is out of bounds for a dimension of size ", bound, " in ", origin);
  }
  // A wrapped negative index was value - bound before wrapping (still negative when it failed).
  const int64_t written = value < 0 ? static_cast<int64_t>(static_cast<uint64_t>(value) - static_cast<uint64_t>(bound))
                                    : value;
  std::string message = label;
  replace_all(message, "{value}", std::to_string(value));
  replace_all(message, "{index}", std::to_string(written));
  replace_all(message, "{limit}", std::to_string(bound - 1));
  replace_all(message, "{bound}", std::to_string(bound));
  return message;
}

}  // namespace luminal::ir
