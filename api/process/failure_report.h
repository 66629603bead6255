// FailureReport: what a failed rank leaves for whoever started it -- its message and when
// it failed -- so that in a cascade (rank 1 fails, then rank 0 loses its connection to it)
// the job names the rank that failed first as the cause, not the first one it noticed.
//
// run_main (api/run_main.h) writes one to the file named by DISTCOMM_ERROR_FILE, which
// tools/launch sets per rank (torchrun's error files work the same way); spawn() passes
// the same text through a pipe. Header-only: the launcher does not link the core.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace distcomm {

constexpr char kErrorFileVariable[] = "DISTCOMM_ERROR_FILE";

struct FailureReport {
  // Wall-clock time of the failure (comparable across the processes of one host, and
  // across hosts as far as their clocks agree).
  int64_t unix_time_ns = 0;
  std::string message;  // "InvalidArgument: rank 1/2 group 'world' gather: root 5 is ..."
  // Its error is another rank's failure, which it adopted (GroupFailure explains an op that
  // a peer cut off with the peer's record): that rank is the cause, however early this one
  // wrote. The rank that failed first writes late: it publishes its failure and cuts its
  // connections before it throws, and the ranks it cut off may throw first.
  bool consequence = false;
  // The world rank whose loss this failure is (it died, or closed its connections, as this
  // rank saw it); -1 when it is not a loss or the rank is unknown. A rank that reports the
  // loss of a rank that failed on its own is not the cause either, however early it wrote:
  // the lost rank may have died before anyone (its launcher included) saw it.
  int lost_rank = -1;

  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  // Format 3 adds the lost rank's line, format 2 the consequence line; formats 1 and 2 are
  // still read.
  std::string encode() const {
    return "distcomm-failure-report-3\n" + std::to_string(unix_time_ns) + "\n" + (consequence ? "1" : "0") + "\n" +
           std::to_string(lost_rank) + "\n" + message;
  }

  static std::optional<FailureReport> decode(const std::string& text) {
    std::istringstream in(text);
    std::string format, time;
    if (!std::getline(in, format)) return std::nullopt;
    const int version = format == "distcomm-failure-report-3"   ? 3
                        : format == "distcomm-failure-report-2" ? 2
                        : format == "distcomm-failure-report-1" ? 1
                                                                : 0;
    if (version == 0 || !std::getline(in, time)) return std::nullopt;
    FailureReport r;
    try {
      r.unix_time_ns = std::stoll(time);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (version >= 2) {
      std::string consequence;
      if (!std::getline(in, consequence) || (consequence != "0" && consequence != "1")) return std::nullopt;
      r.consequence = consequence == "1";
    }
    if (version >= 3) {
      std::string lost;
      if (!std::getline(in, lost)) return std::nullopt;
      try {
        size_t used = 0;
        r.lost_rank = std::stoi(lost, &used);
        if (used != lost.size() || r.lost_rank < -1) return std::nullopt;
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
    const auto start = static_cast<size_t>(in.tellg());
    r.message = start < text.size() ? text.substr(start) : "";
    return r;
  }

  static std::optional<FailureReport> read(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::nullopt;
    std::ostringstream text;
    text << f.rdbuf();
    return decode(text.str());
  }
};

}  // namespace distcomm
