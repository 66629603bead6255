// Every backend refuses a bad setting in the same words (api/plugin/config_reader.h), naming the
// backend, the key, the value and what it accepts, and reads a good one the same way.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "api/errors.h"
#include "backends/gloo/gloo_config.h"
#include "backends/mpi/mpi_config.h"
#include "backends/nccl/nccl_config.h"
#include "backends/shm/shm_config.h"

namespace distcomm {
namespace {

using Config = std::map<std::string, std::string>;
using Parse = std::function<void(const Config&)>;

const std::map<std::string, Parse>& parsers() {
  static const std::map<std::string, Parse> p = {
      {"gloo", [](const Config& c) { gloo::GlooConfig::parse(c); }},
      {"mpi", [](const Config& c) { mpi::MpiConfig::parse(c); }},
      {"nccl", [](const Config& c) { nccl::NcclConfig::parse(c); }},
      {"shm", [](const Config& c) { shm::parse_shm_config(c); }},
  };
  return p;
}

std::string refusal(const std::string& backend, const std::string& key, const std::string& value) {
  try {
    parsers().at(backend)({{key, value}});
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

TEST(BackendSettings, EveryBackendRefusesANonNumberInTheSameWords) {
  struct Case {
    const char* backend;
    const char* key;
    const char* range;
  };
  for (const Case& c : {Case{"shm", "shm_slots", "[2, 64]"}, Case{"mpi", "max_count_per_call", "[1, 2147483647]"},
                        Case{"nccl", "watchdog_poll_us", "[10, 10000000]"}}) {
    for (const char* bad : {"abc", "12x", "", "99999999999999999999999"}) {
      EXPECT_EQ(refusal(c.backend, c.key, bad), std::string(c.backend) + " backend config " + c.key + "='" + bad +
                                                    "': expected an integer in " + c.range);
    }
  }
}

TEST(BackendSettings, EveryBackendRefusesANumberOutOfRangeInTheSameWords) {
  EXPECT_EQ(refusal("shm", "shm_slots", "65"), "shm backend config shm_slots='65': expected an integer in [2, 64]");
  EXPECT_EQ(refusal("mpi", "iallreduce_algorithm", "-1"),
            "mpi backend config iallreduce_algorithm='-1': expected an integer in [0, 100]");
  EXPECT_EQ(refusal("nccl", "shutdown_grace_ms", "3600001"),
            "nccl backend config shutdown_grace_ms='3600001': expected an integer in [0, 3600000]");
}

TEST(BackendSettings, EveryBackendRefusesAnUnknownNameInTheSameWords) {
  EXPECT_EQ(refusal("gloo", "worker_sched", "fifo"), "gloo backend config worker_sched='fifo': expected normal or batch");
  EXPECT_EQ(refusal("gloo", "algorithm", "Ring"),
            "gloo backend config algorithm='Ring': expected auto, ring, ring_chunked, halving_doubling or bcube");
  EXPECT_EQ(refusal("mpi", "progress", "both"), "mpi backend config progress='both': expected waiters or thread");
}

TEST(BackendSettings, BooleansAreReadTheSameWayByEveryBackend) {
  for (const char* yes : {"1", "true", "yes", "on"}) {
    EXPECT_TRUE(nccl::NcclConfig::parse({{"blocking_wait", yes}}).blocking_wait) << yes;
    EXPECT_TRUE(mpi::MpiConfig::parse({{"agreement_check", yes}}).agreement_check) << yes;
  }
  for (const char* no : {"0", "false", "no", "off"}) {
    EXPECT_TRUE(nccl::NcclConfig::parse({{"nonblocking", no}}).nonblocking == false) << no;
    EXPECT_FALSE(mpi::MpiConfig::parse({{"agreement_check", no}}).agreement_check) << no;
  }
  EXPECT_EQ(refusal("mpi", "agreement_check", "2"),
            "mpi backend config agreement_check='2': expected 1/0, true/false, yes/no or on/off");
}

TEST(BackendSettings, GlooReadsItsKeysIntoItsOwnStruct) {
  const gloo::GlooConfig c = gloo::GlooConfig::parse(
      {{"ifname", "eth1"}, {"master_addr", "10.0.0.1"}, {"algorithm", "bcube"}, {"worker_sched", "batch"},
       {"loop_sched", "normal"}, {"shm_slots", "8"}});  // shm's, in an auto group: left alone
  EXPECT_EQ(c.ifname, "eth1");
  EXPECT_EQ(c.hostname, "");
  EXPECT_EQ(c.master_addr, "10.0.0.1");
  EXPECT_EQ(c.algorithm, gloo::AllReduceAlgorithm::kBcube);
  EXPECT_EQ(c.worker_sched, gloo::ThreadScheduling::kBatch);
  EXPECT_EQ(c.loop_sched, gloo::ThreadScheduling::kNormal);
  // An empty value is the default, as it always was for gloo.
  EXPECT_EQ(gloo::GlooConfig::parse({{"worker_sched", ""}}).worker_sched, gloo::ThreadScheduling::kNormal);
  EXPECT_EQ(gloo::GlooConfig::parse({{"loop_sched", ""}}).loop_sched, gloo::ThreadScheduling::kBatch);
}

}  // namespace
}  // namespace distcomm
