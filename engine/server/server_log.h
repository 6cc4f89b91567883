#pragma once
// One line per event on stderr, with a UTC timestamp, written whole even from several threads.
#include <string>

namespace sparkglm::server {

void log_line(const std::string& text);

}  // namespace sparkglm::server
