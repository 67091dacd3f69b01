#include "tessera/serve/stop_filter.h"

#include <algorithm>

namespace tessera::serve {

std::string StopFilter::push(std::string_view piece) {
  if (stopped_) return {};
  pending_ += piece;
  size_t cut = std::string::npos;
  for (const auto& s : stops_) cut = std::min(cut, pending_.find(s));
  std::string out;
  if (cut != std::string::npos) {
    out = pending_.substr(0, cut);
    pending_.clear();
    stopped_ = true;
  } else {
    // Hold back the longest tail that is a proper prefix of some stop.
    size_t hold = 0;
    for (const auto& s : stops_)
      for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k)
        if (std::string_view(pending_).substr(pending_.size() - k) == std::string_view(s).substr(0, k)) {
          hold = k;
          break;
        }
    out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, out.size());
  }
  emitted_ += out;
  return out;
}

std::string StopFilter::finish() {
  if (stopped_) return {};
  std::string out;
  out.swap(pending_);
  emitted_ += out;
  return out;
}

}  // namespace tessera::serve
