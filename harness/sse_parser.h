#pragma once
// Server-sent events framing (the WHATWG "event stream" format) over byte fragments as they come
// off the socket: a fragment may end anywhere, mid-line or between the CR and LF of a CRLF. Lines
// end with LF, CRLF or CR; a line starting with ':' is a comment; `data:` lines of one event are
// joined with '\n'; an empty line ends the event. Fields other than `data` are ignored, and an
// event without data yields nothing.
#include <string>
#include <string_view>
#include <vector>

namespace sparkglm::harness {

class SseParser {
 public:
  // Appends the data of every event this fragment completes to `events`, in order.
  void feed(std::string_view bytes, std::vector<std::string>& events);
  // True when bytes of an unfinished event are buffered (the stream ended mid-event).
  bool pending() const { return !line_.empty() || has_data_; }

 private:
  void end_line(std::vector<std::string>& events);

  std::string line_;       // the current line, without its terminator
  std::string data_;       // the current event's data lines, joined with '\n'
  bool has_data_ = false;  // a `data` field was seen (an empty `data:` still makes an event)
  bool after_cr_ = false;  // the last byte was CR: an LF next completes the same line break
};

}  // namespace sparkglm::harness
