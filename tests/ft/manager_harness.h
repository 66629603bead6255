// The harness of the ft::Manager tests (manager_test.cc, manager_forming_test.cc):
//
// ft::Manager in one process: the members of a job are threads, each with its own Manager,
// all over one HashStore (ManagerOptions::connect gives every connection the same store),
// each generation's group over the in_process test plugin. A toy training: every member
// keeps a state tensor (equal at the start); each step it all_reduces a contribution that
// says which member gave it at which step, and adds the sum to its state when the step
// commits. So the states say exactly which steps were applied with whose contributions:
// a step half-applied, applied twice or applied by some members only shows.
//
// How a member dies here: its thread stops calling the Manager in the middle of a step
// (its group stays, as a hung process's would), and then
//   - the test writes its dead mark (ft/dead/<id>, store_keys.h), as a launcher that saw
//     the process exit would: every member's process is this one, so /proc cannot tell;
//   - or its Manager is destroyed, so its heartbeat stops: its predecessor's monitor
//     finds it gone after heartbeat_timeout.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/errors.h"
#include "api/process_group.h"
#include "api/store/hash_store.h"
#include "api/store/prefix_store.h"
#include "ft/manager.h"
#include "ft/store_keys.h"
#include "tests/testing/test_files.h"

namespace distcomm {
// Unnamed: each test file that includes it is a program of its own.
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int64_t kElements = 4;
constexpr milliseconds kHeartbeatTimeout{500};
const char kSignature[] = "toy: [4] f32, plain sum";

// Member k's contribution at step s: integers well below 2^24, so float sums are exact
// whatever the order, and each (member, step) pair gives another value.
inline float contribution(int k, uint64_t s, int64_t e) { return float(1000 * (k + 1) + 10 * int64_t(s) + e); }

inline std::vector<float> values(const Tensor& t) {
  std::vector<float> v(size_t(t.numel()));
  std::memcpy(v.data(), t.data(), t.nbytes());
  return v;
}

// The sum of the contributions of members `ks` at step s: what the step's all_reduce gives.
inline std::vector<float> step_sum(const std::vector<int>& ks, uint64_t s) {
  std::vector<float> sum(kElements, 0.0f);
  for (int k : ks) {
    for (int64_t e = 0; e < kElements; ++e) sum[size_t(e)] += contribution(k, s, e);
  }
  return sum;
}

inline std::vector<float> initial_state() { return {1.0f, 2.0f, 3.0f, 4.0f}; }

struct Member {
  Member(std::string member_id, int which) : id(std::move(member_id)), k(which), state(Tensor::zeros({kElements})) {
    const std::vector<float> init = initial_state();
    std::memcpy(state.data(), init.data(), state.nbytes());
  }
  std::string id;
  int k;  // which contribution it gives
  Tensor state;
  std::unique_ptr<ft::Manager> ft;
  std::map<uint64_t, std::vector<float>> applied;  // step -> the sum it added to its state
  int redone = 0;                                   // commits that said "redo"
  std::vector<uint64_t> generations;                // the generations it ran steps in
  std::vector<uint64_t> generation_starts;          // the step each of those began at
  std::string error;                                // what escaped begin_step / commit
  ProcessGroupPtr held;                             // the group of a member that "died"
  std::atomic<bool> stopped{false};                 // it stopped calling anything
  std::atomic<bool> finished{false};                // train() returned (read by the test's thread)
};

// What a member does in a step besides the op: stop there for good ("die"), or say its
// step failed.
struct Script {
  // After begin_step of step s, before the op: return true to stop here (die).
  std::function<bool(Member&, uint64_t s, const ProcessGroupPtr& pg)> die_at;
  // After the op of step s (its result in t), before commit.
  std::function<void(Member&, uint64_t s)> after_op;
};

// The training loop of ft/manager.h, until `steps` steps are committed.
inline void train_steps(Member& m, uint64_t steps, const Script& script) {
  try {
    while (m.ft->committed_steps() < steps) {
      ProcessGroupPtr pg = m.ft->begin_step({&m.state});
      const uint64_t s = m.ft->committed_steps();
      if (m.ft->group_changed()) {
        m.generations.push_back(m.ft->generation().number);
        m.generation_starts.push_back(s);
      }
      if (script.die_at && script.die_at(m, s, pg)) {
        m.stopped = true;
        return;
      }
      Tensor t = Tensor::zeros({kElements});
      for (int64_t e = 0; e < kElements; ++e) t.set_item(e, contribution(m.k, s, e));
      try {
        pg->all_reduce(t)->wait();
      } catch (const Error& e) {
        m.ft->step_failed(e.what());
      }
      if (script.after_op) script.after_op(m, s);
      if (m.ft->commit()) {
        EXPECT_EQ(m.applied.count(s), 0u) << m.id << " applied step " << s << " twice";
        m.applied[s] = values(t);
        float* st = m.state.data_as<float>();
        for (int64_t e = 0; e < kElements; ++e) st[e] += values(t)[size_t(e)];
      } else {
        ++m.redone;
      }
    }
  } catch (const std::exception& e) {
    m.error = e.what();
  }
}

inline void train(Member& m, uint64_t steps, const Script& script = {}) {
  train_steps(m, steps, script);
  m.finished = true;  // after every write to m: the test's thread may read m from here on
}

// Whether every member in `ms` has returned from train().
inline bool all_finished(const std::vector<Member*>& ms) {
  for (Member* m : ms) {
    if (!m->finished) return false;
  }
  return true;
}

class FtManager : public ::testing::Test {
 protected:
  void SetUp() override {
    // The in_process plugin, in the test's runfiles (as in_process_group.cc finds it).
    ::setenv("DISTCOMM_PLUGIN_PATH", testing::runfile("tests/testing").c_str(), 1);
  }
  void TearDown() override {
    // Every Manager before the store's last user goes: the dead ones' too.
    for (auto& m : members_) {
      m->ft.reset();
      m->held.reset();
    }
  }

  ft::ManagerOptions options(const std::string& id, int initial, bool joining = false) const {
    ft::ManagerOptions o;
    o.member_id = id;
    o.joining = joining;
    o.initial_members = initial;
    o.backend = "in_process";
    o.heartbeat_interval = milliseconds(20);
    o.heartbeat_timeout = kHeartbeatTimeout;
    // Far above what any step takes: a hang fails the test instead of stalling it.
    o.op_timeout = std::chrono::seconds(20);
    o.recovery_timeout = std::chrono::seconds(20);
    o.state_signature = kSignature;
    StorePtr store = store_;
    o.connect = [store] { return store; };
    return o;
  }

  Member& add_member(const std::string& id, int k) {
    members_.push_back(std::make_unique<Member>(id, k));
    return *members_.back();
  }

  // Members "rank0".."rank<n-1>" (contributions 0..n-1), their Managers made (`tweak`, if
  // given, changes each one's options first).
  std::vector<Member*> first_members(int n, int min_members = 1,
                                     const std::function<void(ft::ManagerOptions&)>& tweak = {}) {
    std::vector<Member*> out;
    for (int r = 0; r < n; ++r) {
      Member& m = add_member("rank" + std::to_string(r), r);
      ft::ManagerOptions o = options(m.id, n);
      o.min_members = min_members;
      if (tweak) tweak(o);
      m.ft = std::make_unique<ft::Manager>(o);
      out.push_back(&m);
    }
    return out;
  }

  // Writes `id`'s dead mark, as a launcher that saw its process end would.
  void mark_dead(const std::string& id, const std::string& why) {
    PrefixStore(ft::keys::kRoot, store_).set(ft::keys::dead(id), why);
  }

  std::shared_ptr<HashStore> store_ = std::make_shared<HashStore>();
  std::vector<std::unique_ptr<Member>> members_;
};

// Runs train for each member on a thread of its own; joins them.
inline void train_all(const std::vector<Member*>& members, uint64_t steps, const Script& script = {}) {
  std::vector<std::thread> threads;
  for (Member* m : members) threads.emplace_back([m, steps, &script] { train(*m, steps, script); });
  for (auto& t : threads) t.join();
}

// Every member in `survivors` finished every step, with states bit-identical and equal to
// the initial state plus, for each step, the sum of the contributions of the members
// `who(s)` (contribution numbers): nothing applied twice, half or by some only.
inline void expect_consistent(const std::vector<Member*>& survivors, uint64_t steps,
                       const std::function<std::vector<int>(uint64_t)>& who) {
  std::vector<float> expected = initial_state();
  for (uint64_t s = 0; s < steps; ++s) {
    const std::vector<float> sum = step_sum(who(s), s);
    for (int64_t e = 0; e < kElements; ++e) expected[size_t(e)] += sum[size_t(e)];
  }
  for (Member* m : survivors) {
    EXPECT_EQ(m->error, "") << m->id;
    EXPECT_EQ(m->ft->committed_steps(), steps) << m->id;
    EXPECT_EQ(values(m->state), expected) << m->id << "'s state";
    EXPECT_EQ(std::memcmp(m->state.data(), survivors.front()->state.data(), m->state.nbytes()), 0)
        << m->id << "'s state differs from " << survivors.front()->id << "'s";
    for (const auto& [s, sum] : m->applied) EXPECT_EQ(sum, step_sum(who(s), s)) << m->id << " step " << s;
  }
}

inline std::vector<int> all_of(int n) {
  std::vector<int> v;
  for (int k = 0; k < n; ++k) v.push_back(k);
  return v;
}

inline std::string ids_of(const std::vector<std::string>& ids) {
  std::string s;
  for (const auto& id : ids) s += (s.empty() ? "" : ",") + id;
  return s;
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Waits until pred() holds; false after `limit`.
inline bool eventually(const std::function<bool()>& pred, milliseconds limit = milliseconds(20000)) {
  const auto deadline = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

}  // namespace
}  // namespace distcomm
