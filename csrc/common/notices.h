// Warnings the core wants a user to see, without failing anything (a corrupt cache entry that was
// rebuilt, a dump directory that cannot be written). The core is torch- and Python-free, so it
// queues them; the bindings hand the queue to Python (`_C.take_notices()`), which turns each into
// a Python warning after a compile.
#pragma once

#include <string>
#include <vector>

namespace luminal {

struct Notice {
  std::string kind;     // "cache" (a cache entry or directory) or "dump" (a debug dump directory)
  std::string message;  // names the path and the reason
};

// Queues `message` unless a notice with the same `once_key` was queued before in this process.
void notify_once(const std::string& kind, const std::string& once_key, const std::string& message);

// The queued notices, oldest first; empties the queue.
std::vector<Notice> take_notices();

}  // namespace luminal
