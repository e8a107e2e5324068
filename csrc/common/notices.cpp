#include "common/notices.h"

#include <mutex>
#include <set>
#include <utility>

namespace luminal {

namespace {

struct NoticeQueue {
  std::mutex mutex;
  std::set<std::string> seen;  // once keys, for the process's lifetime
  std::vector<Notice> pending;
};

NoticeQueue& queue() {
  static NoticeQueue instance;
  return instance;
}

// Bounds the queue if nobody drains it (a C++-only user): old notices are dropped.
constexpr size_t kMaxPending = 256;

}  // namespace

void notify_once(const std::string& kind, const std::string& once_key, const std::string& message) {
  NoticeQueue& q = queue();
  std::lock_guard<std::mutex> lock(q.mutex);
  if (!q.seen.insert(once_key).second) return;
  if (q.pending.size() >= kMaxPending) q.pending.erase(q.pending.begin());
  q.pending.push_back(Notice{kind, message});
}

std::vector<Notice> take_notices() {
  NoticeQueue& q = queue();
  std::lock_guard<std::mutex> lock(q.mutex);
  return std::exchange(q.pending, {});
}

}  // namespace luminal
