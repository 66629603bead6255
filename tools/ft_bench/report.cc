#include "tools/ft_bench/report.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "tools/ft_bench/event_log.h"

namespace distcomm {
namespace ft_bench {
namespace {

double rate(const std::vector<int64_t>& times_ns) {
  if (times_ns.size() < 2) return 0;
  return static_cast<double>(times_ns.size() - 1) / ((times_ns.back() - times_ns.front()) / 1e9);
}

std::string number(double v, int digits = 3) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, v);
  return text;
}

}  // namespace

Metrics measure(const RunOutcome& run, const std::string& victim) {
  Metrics m;
  m.ok = run.ok;
  m.error = run.error;
  m.wall_s = run.wall_s;
  const auto logs = read_event_logs(run.log_dir);
  int64_t kill_ns = 0, kill_step = 0;
  if (auto it = logs.find(victim); it != logs.end()) {
    for (const Event& e : it->second) {
      if (e.kind == "kill") {
        kill_ns = e.ns;
        kill_step = e.step;
      }
    }
  }
  m.killed = kill_ns > 0;
  std::set<std::string> checksums;
  std::string first_survivor;
  for (const auto& [member, events] : logs) {
    for (const Event& e : events) {
      if (e.kind == "end") {
        checksums.insert(e.text);
        ++m.finished;
      }
      if (e.kind == "joined") m.joined = true;
    }
    // The first members that lived through the kill; a replacement's id has a '+'.
    if (member == victim || member.find('+') != std::string::npos) continue;
    if (first_survivor.empty()) first_survivor = member;
    if (!m.killed) continue;
    int64_t noticed = -1, recovered = -1, commits = 0;
    std::set<int64_t> steps;
    for (const Event& e : events) {
      if (e.kind == "abort" && e.ns >= kill_ns && noticed < 0) noticed = e.ns;
      // A survivor may log the step before the kill a moment after the victim died: the
      // recovery is the first commit of the killed step or a later one.
      if (e.kind == "commit" && e.ns > kill_ns && e.step >= kill_step && recovered < 0) recovered = e.ns;
      if (e.kind == "commit") {
        ++commits;
        steps.insert(e.step);
      }
    }
    if (noticed >= 0) m.detection_s = std::max(m.detection_s, (noticed - kill_ns) / 1e9);
    if (recovered >= 0) m.recovery_s = std::max(m.recovery_s, (recovered - kill_ns) / 1e9);
    // Steps committed twice (after a restart from an older checkpoint), and the step under way.
    if (m.killed) m.steps_lost = std::max<int64_t>(m.steps_lost, commits - static_cast<int64_t>(steps.size()) + 1);
  }
  m.params_identical = checksums.size() == 1;
  if (!first_survivor.empty()) {
    std::vector<int64_t> before, after;
    int seen = 0;
    for (const Event& e : logs.at(first_survivor)) {
      if (e.kind != "commit") continue;
      if (!m.killed || e.ns < kill_ns) {
        if (seen++ >= 2) before.push_back(e.ns);
      } else {
        after.push_back(e.ns);
      }
    }
    m.steps_per_s_before = rate(before);
    m.steps_per_s_after = rate(after);
  }
  return m;
}

std::string metrics_json(const Metrics& m) {
  return std::string("{\"ok\": ") + (m.ok ? "true" : "false") + ", \"killed\": " + (m.killed ? "true" : "false") +
         ", \"detection_s\": " + number(m.detection_s) + ", \"recovery_s\": " + number(m.recovery_s) +
         ", \"steps_lost\": " + std::to_string(m.steps_lost) + ", \"steps_per_s_before\": " +
         number(m.steps_per_s_before, 2) + ", \"steps_per_s_after\": " + number(m.steps_per_s_after, 2) +
         ", \"params_identical\": " + (m.params_identical ? "true" : "false") +
         ", \"finished\": " + std::to_string(m.finished) + ", \"joined\": " + (m.joined ? "true" : "false") +
         ", \"wall_s\": " + number(m.wall_s, 2) + ", \"error\": \"" + m.error + "\"}";
}

std::string metrics_table(const std::vector<std::pair<std::string, Metrics>>& columns) {
  auto row = [&](const std::string& name, auto cell) {
    char head[32];
    std::snprintf(head, sizeof(head), "%-20s", name.c_str());
    std::string line = head;
    for (const auto& [title, m] : columns) {
      char c[32];
      std::snprintf(c, sizeof(c), " %20s", cell(m).c_str());
      line += c;
    }
    return line + "\n";
  };
  auto seconds_or_dash = [](double v) { return v < 0 ? std::string("-") : number(v); };
  std::string t;
  {
    char head[32];
    std::snprintf(head, sizeof(head), "%-20s", "");
    t += head;
    for (const auto& [title, m] : columns) {
      char c[32];
      std::snprintf(c, sizeof(c), " %20s", title.c_str());
      t += c;
    }
    t += "\n";
  }
  t += row("detection_s", [&](const Metrics& m) { return m.killed ? seconds_or_dash(m.detection_s) : "-"; });
  t += row("recovery_s", [&](const Metrics& m) { return m.killed ? seconds_or_dash(m.recovery_s) : "-"; });
  t += row("steps_lost", [](const Metrics& m) { return std::to_string(m.steps_lost); });
  t += row("steps_per_s_before", [](const Metrics& m) { return number(m.steps_per_s_before, 2); });
  t += row("steps_per_s_after", [](const Metrics& m) { return m.killed ? number(m.steps_per_s_after, 2) : "-"; });
  t += row("params_identical", [](const Metrics& m) { return std::string(m.params_identical ? "yes" : "NO"); });
  t += row("processes_finished", [](const Metrics& m) { return std::to_string(m.finished); });
  t += row("wall_s", [](const Metrics& m) { return number(m.wall_s, 2); });
  t += row("ok", [](const Metrics& m) { return std::string(m.ok ? "yes" : "FAILED"); });
  return t;
}

}  // namespace ft_bench
}  // namespace distcomm
