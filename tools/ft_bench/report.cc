#include "tools/ft_bench/report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "tools/ft_bench/event_log.h"

namespace distcomm {
namespace ft_bench {
namespace {

double rate(const std::vector<int64_t>& times_ns) {
  if (times_ns.size() < 2) return 0;
  return static_cast<double>(times_ns.size() - 1) / ((times_ns.back() - times_ns.front()) / 1e9);
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\u%04x", c);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

std::string number(double v, int digits = 3) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, v);
  return text;
}

}  // namespace

Metrics measure(const RunOutcome& run, const std::vector<std::string>& victims) {
  Metrics m;
  m.ok = run.ok;
  m.error = run.error;
  m.wall_s = run.wall_s;
  m.log_dir = run.log_dir;
  m.refused_started = run.refused_started;
  m.refused_as_expected = run.refused_as_expected;
  m.refused_exit = run.refused_exit;
  m.refused_message = run.refused_message;
  const auto logs = read_event_logs(run.log_dir);
  auto is_victim = [&](const std::string& member) {
    return std::find(victims.begin(), victims.end(), member) != victims.end();
  };
  // The first kill: the earliest "kill" line of any process.
  int64_t kill_ns = 0, kill_step = 0;
  for (const auto& [member, events] : logs) {
    for (const Event& e : events) {
      if (e.kind != "kill") continue;
      ++m.kills;
      if (kill_ns == 0 || e.ns < kill_ns) {
        kill_ns = e.ns;
        kill_step = e.step;
      }
    }
  }
  m.killed = kill_ns > 0;
  std::set<std::string> checksums;
  std::map<int64_t, std::map<std::string, std::string>> sums;  // step -> checksum -> a member that wrote it
  std::string first_survivor;
  std::vector<std::pair<std::string, Event>> received;  // replacements' "state" lines
  std::set<int64_t> ends;
  for (const auto& [member, events] : logs) {
    int64_t joined_at = -1, end = -1;
    std::vector<int64_t> committed;
    for (const Event& e : events) {
      if (e.kind == "end") {
        checksums.insert(e.text);
        ++m.finished;
        m.members_final.push_back(member);
        end = e.step;
        ends.insert(e.step);
      }
      if (e.kind == "joined") {
        m.joined = true;
        joined_at = e.step;
        if (m.joined_step < 0 || e.step < m.joined_step) m.joined_step = e.step;
      }
      if (e.kind == "commit") committed.push_back(e.step);
      if (e.kind == "sum") sums[e.step].emplace(e.text, member);
      if (e.kind == "state") received.emplace_back(member, e);
    }
    if (end >= 0) {
      // Every step from its first to its end, and none after (a restart's redone ones count once).
      const std::set<int64_t> steps(committed.begin(), committed.end());
      for (int64_t s = std::max<int64_t>(joined_at, 0); s < end && m.missed.empty(); ++s) {
        if (!steps.count(s)) m.missed = member + " did not commit step " + std::to_string(s);
      }
      if (m.missed.empty() && !steps.empty() && *steps.rbegin() >= end) {
        m.missed = member + " committed step " + std::to_string(*steps.rbegin()) + " after its end at " + std::to_string(end);
      }
    }
    // The first members that lived through the kills; a replacement's id has a '+'.
    if (is_victim(member) || member.find('+') != std::string::npos) continue;
    if (first_survivor.empty()) first_survivor = member;
    int64_t noticed = -1, recovered = -1, aborts = 0;
    for (const Event& e : events) {
      if (e.kind == "abort") ++aborts;
      if (!m.killed) continue;
      if (e.kind == "abort" && e.ns >= kill_ns && noticed < 0) noticed = e.ns;
      // A survivor may log the step before the kill a moment after the victim died: the
      // recovery is the first commit of the killed step or a later one.
      if (e.kind == "commit" && e.ns > kill_ns && e.step >= kill_step && recovered < 0) recovered = e.ns;
    }
    if (noticed >= 0) m.detection_s = std::max(m.detection_s, (noticed - kill_ns) / 1e9);
    if (recovered >= 0) m.recovery_s = std::max(m.recovery_s, (recovered - kill_ns) / 1e9);
    const std::set<int64_t> distinct(committed.begin(), committed.end());
    const int64_t twice = static_cast<int64_t>(committed.size() - distinct.size());
    // In-process every aborted step is one lost; the restart path loses the step under way
    // (its ranks may be stopped before they log it) and redoes those since the checkpoint.
    const int64_t lost = run.in_process ? twice + aborts : twice + (m.killed ? 1 : 0);
    m.steps_lost = std::max(m.steps_lost, lost);
  }
  m.every_step_committed = m.finished > 0 && m.missed.empty();
  int64_t last_commit_ns = 0;
  for (const auto& [member, events] : logs) {
    for (const Event& e : events) {
      if (e.kind == "commit") last_commit_ns = std::max(last_commit_ns, e.ns);
    }
  }
  m.refused_during_training = run.refused_started && run.refused_ended_ns > 0 && run.refused_ended_ns < last_commit_ns;
  m.steps_committed = ends.size() == 1 ? *ends.begin() : -1;
  m.params_identical = checksums.size() == 1;
  m.params_identical_every_step = !sums.empty();
  for (const auto& [step, by_sum] : sums) {
    if (by_sum.size() == 1) continue;
    m.params_identical_every_step = false;
    m.first_difference = "step " + std::to_string(step) + ":";
    for (const auto& [sum, member] : by_sum) m.first_difference += " " + member + " " + sum;
    break;
  }
  m.joined_state_identical = !received.empty();
  for (const auto& [member, e] : received) {
    const auto before = sums.find(e.step - 1);
    const bool same = before != sums.end() && before->second.size() == 1 && before->second.begin()->first == e.text;
    if (!same) {
      m.joined_state_identical = false;
      if (m.first_difference.empty()) {
        m.first_difference = member + " received " + e.text + " before step " + std::to_string(e.step) + ", the members had " +
                             (before == sums.end() ? std::string("none logged") : before->second.begin()->first);
      }
    }
  }
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

bool run_passed(const Metrics& m) {
  return m.ok && m.params_identical && m.params_identical_every_step && m.every_step_committed &&
         (!m.joined || m.joined_state_identical);
}

std::string metrics_json(const Metrics& m) {
  std::string members;
  for (const std::string& id : m.members_final) members += (members.empty() ? "\"" : ", \"") + json_escape(id) + "\"";
  std::string refused = "null";
  if (m.refused_started) {
    refused = std::string("{\"refused\": ") + (m.refused_as_expected ? "true" : "false") +
              ", \"during_training\": " + (m.refused_during_training ? "true" : "false") + ", \"exit\": \"" +
              json_escape(m.refused_exit) + "\", \"message\": \"" + json_escape(m.refused_message) + "\"}";
  }
  return std::string("{\"ok\": ") + (m.ok ? "true" : "false") + ", \"killed\": " + (m.killed ? "true" : "false") +
         ", \"kills\": " + std::to_string(m.kills) + ", \"detection_s\": " + number(m.detection_s) +
         ", \"recovery_s\": " + number(m.recovery_s) + ", \"steps_lost\": " + std::to_string(m.steps_lost) +
         ", \"steps_per_s_before\": " + number(m.steps_per_s_before, 2) +
         ", \"steps_per_s_after\": " + number(m.steps_per_s_after, 2) +
         ", \"params_identical\": " + (m.params_identical ? "true" : "false") +
         ", \"params_identical_every_step\": " + (m.params_identical_every_step ? "true" : "false") +
         ", \"first_difference\": \"" + json_escape(m.first_difference) + "\"" +
         ", \"finished\": " + std::to_string(m.finished) + ", \"members_final\": [" + members + "]" +
         ", \"steps_committed\": " + std::to_string(m.steps_committed) +
         ", \"every_step_committed\": " + (m.every_step_committed ? "true" : "false") +
         ", \"missed\": \"" + json_escape(m.missed) + "\"" +
         ", \"joined\": " + (m.joined ? "true" : "false") + ", \"joined_step\": " + std::to_string(m.joined_step) +
         ", \"joined_state_identical\": " + (m.joined_state_identical ? "true" : "false") +
         ", \"refused_joiner\": " + refused + ", \"wall_s\": " + number(m.wall_s, 2) + ", \"log_dir\": \"" +
         json_escape(m.log_dir) + "\", \"error\": \"" + json_escape(m.error) + "\"}";
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
  t += row("  after_every_step", [](const Metrics& m) { return std::string(m.params_identical_every_step ? "yes" : "NO"); });
  t += row("processes_finished", [](const Metrics& m) { return std::to_string(m.finished); });
  t += row("members_final (rank)", [](const Metrics& m) {
    std::string s;
    for (const std::string& id : m.members_final) s += (s.empty() ? "" : ",") + (id.rfind("rank", 0) == 0 ? id.substr(4) : id);
    return s.empty() ? std::string("-") : s;
  });
  t += row("steps_committed", [](const Metrics& m) { return std::to_string(m.steps_committed); });
  t += row("  by_every_finisher", [](const Metrics& m) { return std::string(m.every_step_committed ? "yes" : "NO"); });
  t += row("joined_step", [](const Metrics& m) { return m.joined ? std::to_string(m.joined_step) : std::string("-"); });
  t += row("  received_state", [](const Metrics& m) {
    return std::string(!m.joined ? "-" : m.joined_state_identical ? "identical" : "DIFFERS");
  });
  t += row("refused_joiner", [](const Metrics& m) {
    return std::string(!m.refused_started          ? "-"
                       : !m.refused_as_expected    ? "NOT REFUSED"
                       : m.refused_during_training ? "refused"
                                                   : "refused, late");
  });
  t += row("wall_s", [](const Metrics& m) { return number(m.wall_s, 2); });
  t += row("ok", [](const Metrics& m) { return std::string(m.ok ? "yes" : "FAILED"); });
  return t;
}

}  // namespace ft_bench
}  // namespace distcomm
