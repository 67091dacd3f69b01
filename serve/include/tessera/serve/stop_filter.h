#pragma once
// OpenAI `stop` sequences over streamed text. Generated text arrives in
// pieces; a stop sequence may straddle pieces, so the filter holds back any
// tail that could still become one, and cuts the text at the first stop
// found (the stop sequence itself is not returned, as in the OpenAI API).
#include <string>
#include <string_view>
#include <vector>

namespace tessera::serve {

class StopFilter {
 public:
  explicit StopFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Appends `piece`; returns the text now safe to emit. After a stop sequence
  // is seen, stopped() is true and further pieces are ignored.
  std::string push(std::string_view piece);
  // Generation ended without a stop: the held-back tail.
  std::string finish();
  bool stopped() const { return stopped_; }
  const std::string& text() const { return emitted_; }  // everything returned so far

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // received, not yet emitted
  std::string emitted_;
  bool stopped_ = false;
};

}  // namespace tessera::serve
