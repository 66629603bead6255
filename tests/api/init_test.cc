// init_process_group and the launch environment: which variables are read, what a
// missing or malformed one says, and real rendezvous over env://, tcp:// and file://.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

#include "api/errors.h"
#include "api/store/file_store.h"
#include "api/store/hash_store.h"
#include "api/init.h"
#include "api/process/local_processes.h"
#include "api/store/server/tcp_store_server.h"
#include "api/store/tcp_store.h"
#include "tests/api/plugin_test_env.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

const char* kVars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                       "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                       "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                       "SLURM_NTASKS_PER_NODE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK",
                       "DISTCOMM_BACKEND", "DISTCOMM_HOST_ID", "DISTCOMM_STORE_SERVED_BY", "DISTCOMM_DEBUG"};

class InitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    use_test_plugins();
    for (const char* v : kVars) ::unsetenv(v);
  }
  void TearDown() override { destroy_process_group(); }
};

// What init_process_group refuses a single_rank group of these ranks with ("" if nothing).
std::string init_refusal(int rank, int world_size) {
  InitOptions o;
  o.backend = "single_rank";
  o.rank = rank;
  o.world_size = world_size;
  try {
    init_process_group(o);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST_F(InitTest, ReadsTorchrunThenOpenMpiThenSlurm) {
  ::setenv("SLURM_PROCID", "5", 1);
  ::setenv("SLURM_NTASKS", "8", 1);
  EXPECT_EQ(read_launch_env().source, "slurm");
  EXPECT_EQ(read_launch_env().rank, 5);
  ::setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  EXPECT_EQ(read_launch_env().source, "mpirun");
  EXPECT_EQ(read_launch_env().world_size, 4);
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "3", 1);
  ::setenv("LOCAL_RANK", "1", 1);
  ::setenv("MASTER_ADDR", "10.1.2.3", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  const LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 3);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "10.1.2.3");
  EXPECT_EQ(e.master_port, 29500);
}

// What a self-launching program asks before it starts its own ranks.
TEST_F(InitTest, LaunchedAsRankOnlyWhenALauncherGaveARank) {
  EXPECT_FALSE(launched_as_rank());
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  EXPECT_TRUE(launched_as_rank());
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ::setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_TRUE(launched_as_rank());
}

TEST_F(InitTest, MalformedVariableIsNamed) {
  ::setenv("RANK", "one", 1);
  try {
    read_launch_env();
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='one'"), std::string::npos) << e.what();
  }
}

// The host id travels in the placements the ranks exchange, where '|' separates what
// nccl needs: refused before anything is sent.
TEST_F(InitTest, AHostIdWithTheSeparatorIsRefused) {
  ::setenv("DISTCOMM_HOST_ID", "rack1|nccl", 1);
  const std::string m = init_refusal(0, 1);
  EXPECT_NE(m.find("DISTCOMM_HOST_ID='rack1|nccl' contains '|'"), std::string::npos) << m;
}

TEST_F(InitTest, MissingRankSaysHowToProvideIt) {
  const std::string m = init_refusal(-1, -1);
  EXPECT_NE(m.find("RANK and WORLD_SIZE"), std::string::npos) << m;
}

// One of the two known: the message says which is missing, in the launcher's words (a review
// found "rank and world size are unknown" for RANK=0 without WORLD_SIZE).
TEST_F(InitTest, HalfOfRankAndWorldSizeNamesTheMissingOne) {
  ::setenv("RANK", "0", 1);
  std::string m = init_refusal(-1, -1);
  EXPECT_NE(m.find("the rank is 0 but the world size is unknown: set WORLD_SIZE"), std::string::npos) << m;
  ::unsetenv("RANK");
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  m = init_refusal(-1, -1);
  EXPECT_NE(m.find("the world size is 4 but the rank is unknown: set OMPI_COMM_WORLD_RANK"), std::string::npos) << m;
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  m = init_refusal(2, -1);
  EXPECT_NE(m.find("the rank is 2 but the world size is unknown"), std::string::npos) << m;
  // A PMIx launcher sets the rank alone (an outside user read "set (none: pass
  // InitOptions.world_size) (or InitOptions.world_size) too").
  ::setenv("PMIX_RANK", "0", 1);
  m = init_refusal(-1, -1);
  ::unsetenv("PMIX_RANK");
  EXPECT_NE(m.find("the rank is 0 but the world size is unknown: pass InitOptions.world_size (a pmix launcher sets no "
                   "variable for it)"),
            std::string::npos)
      << m;
}

TEST_F(InitTest, NumbersOutOfRangeAndALocalRankBeyondItsHostAreNamed) {
  ::setenv("WORLD_SIZE", "99999999999", 1);
  std::string m;
  try {
    read_launch_env();
  } catch (const InvalidArgument& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("WORLD_SIZE='99999999999' is not an integer from 1 to 1073741824"), std::string::npos) << m;
  // A world of no ranks is refused here, naming the variable (it passed as "from 0 to ..."
  // and failed init with "rank 0 is outside world size 0"); a rank may be 0.
  ::setenv("WORLD_SIZE", "0", 1);
  ::setenv("RANK", "0", 1);
  m.clear();
  try {
    read_launch_env();
  } catch (const InvalidArgument& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("environment variable WORLD_SIZE='0' is not an integer from 1 to 1073741824"), std::string::npos)
      << m;
  ::unsetenv("RANK");
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("RANK", "0", 1);
  ::setenv("LOCAL_RANK", "5", 1);
  ::setenv("LOCAL_WORLD_SIZE", "2", 1);
  m.clear();
  try {
    read_launch_env();
  } catch (const InvalidArgument& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("LOCAL_RANK=5 is not below LOCAL_WORLD_SIZE=2"), std::string::npos) << m;
}

// Under mpirun (its variables set), env:// without an address points at backend mpi.
TEST_F(InitTest, UnderMpirunTheMissingAddressPointsAtBackendMpi) {
  ::setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
  const std::string m = init_refusal(-1, -1);
  EXPECT_NE(m.find("MASTER_ADDR and MASTER_PORT"), std::string::npos) << m;
  EXPECT_NE(m.find("under mpirun, backend 'mpi' needs neither"), std::string::npos) << m;
}

TEST_F(InitTest, EnvMethodNeedsMasterAddress) {
  const std::string m = init_refusal(0, 1);
  EXPECT_NE(m.find("MASTER_ADDR and MASTER_PORT"), std::string::npos) << m;
}

TEST_F(InitTest, BadInitMethodsAreRefused) {
  InitOptions o;
  o.backend = "single_rank";
  o.rank = 0;
  o.world_size = 1;
  o.init_method = "tcp://localhost";
  EXPECT_THROW(init_process_group(o), InvalidArgument);
  o.init_method = "tcp://localhost:99999";
  EXPECT_THROW(init_process_group(o), InvalidArgument);
  o.init_method = "udp://x:1";
  EXPECT_THROW(init_process_group(o), InvalidArgument);
  o.rank = 1;
  o.init_method = "tcp://127.0.0.1:1";
  EXPECT_THROW(init_process_group(o), InvalidArgument);  // rank 1 of a world of 1
}

// tcp://:PORT (no host) had rank 0's store listen on every interface (the wildcard), which
// only DISTCOMM_STORE_BIND=* may ask for (docs/security.md): refused before anything listens,
// as a missing port is; and so is an empty MASTER_ADDR.
// A group's timeout of 0 (or less) would end init and every op at once: refused first, as an
// op's own 0 is (an outside user's op timeout of 0 meant "never" on gloo and mpi, "at once"
// on shm).
TEST_F(InitTest, AGroupTimeoutOfZeroIsRefused) {
  InitOptions o;
  o.backend = "single_rank";
  o.rank = 0;
  o.world_size = 1;
  o.timeout = std::chrono::milliseconds(0);
  try {
    init_process_group(o);
    ADD_FAILURE() << "init took a timeout of 0";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("InitOptions.timeout=0 ms: give a positive timeout"), std::string::npos)
        << e.what();
  }
  destroy_process_group();
  ProcessGroupOptions po;
  po.store = std::make_shared<HashStore>();
  po.size = 1;
  po.backend = "single_rank";
  po.timeout = std::chrono::milliseconds(-5);
  try {
    ProcessGroup::create(po);
    ADD_FAILURE() << "ProcessGroup::create took a timeout of -5 ms";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ProcessGroupOptions.timeout=-5 ms: give a positive timeout"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(InitTest, AnEmptyStoreHostIsRefusedBeforeAnythingListens) {
  InitOptions o;
  o.backend = "single_rank";
  o.rank = 0;
  o.world_size = 1;
  for (const char* m : {"tcp://:0", "tcp://[]:0"}) {
    o.init_method = m;
    try {
      init_process_group(o);
      ADD_FAILURE() << m << ": init made a store that listens on every interface";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("init_method '") + m + "': '" + (m + 6) +
                                           "' is not host:port: the host is empty"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("DISTCOMM_STORE_BIND=*"), std::string::npos) << e.what();
    }
    destroy_process_group();
  }
  ::setenv("MASTER_ADDR", "", 1);
  ::setenv("MASTER_PORT", "0", 1);
  const std::string m = init_refusal(0, 1);
  EXPECT_NE(m.find("init_method env:// needs MASTER_ADDR and MASTER_PORT"), std::string::npos) << m;
  // A server store given no host, made without init, says so too.
  TCPStoreOptions so;
  so.host = "";
  so.is_server = true;
  try {
    TCPStore store(so);
    ADD_FAILURE() << "a TCPStore with an empty host listens on " << store.host() << ":" << store.port();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("TCPStore: host is empty"), std::string::npos) << e.what();
  }
}

// The socket calls take a port modulo 65536 (99999 would listen on 34463 while the others
// look for 99999): a port outside 0-65535 is refused before anything connects, naming
// where it came from, the same way from MASTER_PORT and from tcp://host:port.
TEST_F(InitTest, APortOutsideTheRangeIsRefusedNamingItsSource) {
  const std::string expected = "='99999': expected a port in 1-65535, or 0 for rank 0's store to pick a free one";
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "1", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  for (const char* port : {"99999", "65536", "-1", "29500x"}) {
    ::setenv("MASTER_PORT", port, 1);
    const std::string m = init_refusal(-1, -1);
    EXPECT_NE(m.find(std::string("MASTER_PORT='") + port + "': expected a port in 1-65535"), std::string::npos) << m;
  }
  ::setenv("MASTER_PORT", "65535", 1);
  EXPECT_EQ(read_launch_env().master_port, 65535);
  ::unsetenv("MASTER_PORT");
  InitOptions o;
  o.backend = "single_rank";
  o.init_method = "tcp://127.0.0.1:99999";
  try {
    init_process_group(o);
    ADD_FAILURE() << "init took port 99999";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("init_method 'tcp://127.0.0.1:99999': port" + expected), std::string::npos)
        << e.what();
  }
}

TEST_F(InitTest, EnvRendezvousWithPortZeroMakesTheDefaultGroup) {
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "1", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "0", 1);  // the server in rank 0 picks a free port
  ::setenv("DISTCOMM_BACKEND", "single_rank", 1);
  EXPECT_FALSE(is_initialized());
  auto pg = init_process_group();
  EXPECT_TRUE(is_initialized());
  EXPECT_EQ(&default_group(), pg.get());
  EXPECT_EQ(default_group_ptr(), pg);
  EXPECT_EQ(pg->backend_name(), "single_rank");
  EXPECT_THROW(init_process_group(), InvalidArgument);  // twice
  destroy_process_group();
  EXPECT_FALSE(is_initialized());
  try {
    default_group_ptr();
    ADD_FAILURE() << "default_group_ptr() returned after destroy_process_group()";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "no default process group: call init_process_group() first");
  }
  EXPECT_THROW(default_group(), InvalidArgument);
  EXPECT_EQ(pg.use_count(), 1) << "the default group let go of it";
}

// torch's init_method forms: rank and world_size in the query, a '/' after the port
// (helper-73: the query was ignored, "rank and world size are unknown", and the '/' made the
// port "29612/"). The query wins over the environment; one that disagrees with InitOptions is
// refused naming both, and so is an unknown setting in it.
TEST_F(InitTest, AnInitMethodsQueryGivesRankAndWorldSizeAsTorchTakesThem) {
  InitOptions o;
  o.backend = "single_rank";
  o.init_method = "tcp://127.0.0.1:0/?rank=0&world_size=1";
  auto pg = init_process_group(o);
  EXPECT_EQ(pg->rank(), 0);
  EXPECT_EQ(pg->size(), 1);
  destroy_process_group();
  pg.reset();

  auto refusal = [](InitOptions o) {
    try {
      init_process_group(o);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  o.init_method = "tcp://127.0.0.1:0?rank=0&world_size=1";
  o.world_size = 2;
  EXPECT_NE(refusal(o).find("init_method 'tcp://127.0.0.1:0?rank=0&world_size=1' says world_size 1, InitOptions 2"),
            std::string::npos)
      << refusal(o);
  o.world_size = -1;
  // The query wins over the environment, as in torch: a worker forked by a launched process
  // inherits the launcher's RANK and WORLD_SIZE.
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  o.init_method = "tcp://127.0.0.1:0?rank=0&world_size=1&use_libuv=0";
  pg = init_process_group(o);
  EXPECT_EQ(pg->rank(), 0);
  EXPECT_EQ(pg->size(), 1);
  destroy_process_group();
  pg.reset();
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  o.init_method = "tcp://127.0.0.1:0?rank=0&size=1";
  EXPECT_NE(refusal(o).find("unknown setting 'size'"), std::string::npos) << refusal(o);
  o.init_method = "tcp://127.0.0.1:0?rank=0&world_size=0";
  EXPECT_NE(refusal(o).find("world_size='0' is not an integer from 1"), std::string::npos) << refusal(o);
}

// A single rank's job over env://, its store at MASTER_PORT port.
void set_single_rank_job(int port) {
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "1", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::setenv("DISTCOMM_BACKEND", "single_rank", 1);
}

// $DISTCOMM_BACKEND and InitOptions::backend in any case, as torch.distributed takes them;
// an unknown name is still refused.
TEST_F(InitTest, BackendNamesAreTakenInAnyCase) {
  set_single_rank_job(0);
  ::setenv("DISTCOMM_BACKEND", "SINGLE_RANK", 1);
  EXPECT_EQ(init_process_group()->backend_name(), "single_rank");
  destroy_process_group();
  InitOptions o;
  o.backend = "Single_Rank";
  EXPECT_EQ(init_process_group(o)->backend_name(), "single_rank");
  destroy_process_group();
  o.backend = "No_Such";
  EXPECT_THROW(init_process_group(o), BackendUnavailable);
}

// Under a launcher that serves the store (DISTCOMM_STORE_SERVED_BY=launcher), rank 0 is a
// client: it connects to the launcher's server (serving it too would find the port taken),
// and the store lives on after rank 0's group is gone.
TEST_F(InitTest, WhenTheLauncherServesTheStoreRankZeroIsAClient) {
  TCPStoreServerOptions so;
  so.bind_address = "127.0.0.1";
  so.identity = new_job_identity();
  so.world_size = 1;
  TCPStoreServer launchers(so);
  launchers.start();
  set_single_rank_job(launchers.port());
  ::setenv("DISTCOMM_STORE_SERVED_BY", "launcher", 1);
  InitOptions o;
  o.identity = so.identity;
  ProcessGroupPtr pg = init_process_group(o);
  auto* store = dynamic_cast<TCPStore*>(pg->store().get());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->port(), launchers.port());
  store->set("from rank 0", "hello");
  pg.reset();
  destroy_process_group();
  EXPECT_TRUE(launchers.running());
  TCPStoreOptions co;
  co.port = launchers.port();
  co.identity = so.identity;
  EXPECT_EQ(TCPStore(co).get_string("from rank 0"), "hello") << "the launcher's store outlived rank 0's group";
}

// Nobody serves where the launcher should: rank 0 waits for it like the other ranks, and
// its Timeout names the launcher.
TEST_F(InitTest, RankZeroWaitsForTheLaunchersStoreAndNamesIt) {
  const int port = local::pick_free_port();
  set_single_rank_job(port);
  ::setenv("DISTCOMM_STORE_SERVED_BY", "launcher", 1);
  InitOptions o;
  o.timeout = std::chrono::milliseconds(1000);
  try {
    init_process_group(o);
    ADD_FAILURE() << "init returned without a store";
  } catch (const Timeout& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("waiting for the launcher to serve the store at 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("it has exited, or 127.0.0.1:" + std::to_string(port) + " is not its address"), std::string::npos)
        << m;
  }
}

// Rank 0 serves the store when the launcher does not say it does, when the program says so
// (InitOptions::store_served_by), and for an explicit tcp://host:port, which names a store
// the launcher does not serve. A served-by that is neither is refused, naming the variable.
TEST_F(InitTest, RankZeroServesTheStoreUnlessTheLauncherDoes) {
  set_single_rank_job(0);  // port 0: only a server can take it
  init_process_group();
  destroy_process_group();
  ::setenv("DISTCOMM_STORE_SERVED_BY", "launcher", 1);
  InitOptions o;
  o.store_served_by = StoreServedBy::kRankZero;
  init_process_group(o);
  destroy_process_group();
  o = InitOptions();
  o.init_method = "tcp://127.0.0.1:0";
  init_process_group(o);
  destroy_process_group();
  o.store_served_by = StoreServedBy::kLauncher;
  try {
    init_process_group(o);
    ADD_FAILURE() << "a client took port 0";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("has no port to connect to"), std::string::npos) << e.what();
  }
  ::setenv("DISTCOMM_STORE_SERVED_BY", "rank0", 1);
  try {
    init_process_group();
    ADD_FAILURE() << "DISTCOMM_STORE_SERVED_BY=rank0 was taken";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("DISTCOMM_STORE_SERVED_BY=\"rank0\": expected 'launcher'"), std::string::npos)
        << e.what();
  }
}

// A value with a control character in it (an env file written with the value's newline:
// "launcher\n") is refused on one line, the character escaped, where the raw newline split the
// message in two and the value looked like the right one.
TEST_F(InitTest, AStoreServedByWithAControlCharacterIsRefusedOnOneLine) {
  set_single_rank_job(0);
  const std::map<std::string, std::string> quoted = {{"launcher\n", "\"launcher\\n\""},
                                                     {"laun\tcher", "\"laun\\u0009cher\""},
                                                     {"\x1b[31mlauncher", "\"\\u001b[31mlauncher\""}};
  for (const auto& [value, shown] : quoted) {
    ::setenv("DISTCOMM_STORE_SERVED_BY", value.c_str(), 1);
    try {
      init_process_group();
      destroy_process_group();
      ADD_FAILURE() << "DISTCOMM_STORE_SERVED_BY=" << shown << " was taken";
    } catch (const InvalidArgument& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.find_first_of("\n\t\x1b"), std::string::npos) << message;
      EXPECT_NE(message.find("DISTCOMM_STORE_SERVED_BY=" + shown + ": expected 'launcher'"), std::string::npos)
          << message;
    }
  }
}

// A bad DISTCOMM_DEBUG is refused before the store is made or reached (helper-66: rank 0
// started serving its TCP store first). Here the store would be refused too, for another
// reason (a launcher's store at port 0): the debug level must be what is said.
TEST_F(InitTest, ABadDebugLevelIsRefusedBeforeTheStore) {
  set_single_rank_job(0);
  ::setenv("DISTCOMM_STORE_SERVED_BY", "launcher", 1);
  ::setenv("DISTCOMM_DEBUG", "LOUD", 1);
  try {
    init_process_group();
    ADD_FAILURE() << "DISTCOMM_DEBUG=LOUD was taken";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("debug level 'LOUD' (DISTCOMM_DEBUG or InitOptions::debug) must be"),
              std::string::npos)
        << e.what();
  }
}

// Four real processes meet through one file and split into two groups by parity.
TEST_F(InitTest, FileRendezvousAndSplitAcrossProcesses) {
  char path[] = "/tmp/distcomm_init_test_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ::unlink(path);
  testing::run_ranks(4, [&](int r, int world) {
    InitOptions o;
    o.backend = "any_size";
    o.rank = r;
    o.world_size = world;
    o.init_method = std::string("file://") + path;
    o.timeout = std::chrono::seconds(20);
    auto pg = init_process_group(o);
    auto half = pg->split(r % 2, -r);  // key -r: reversed order inside each group
    ASSERT_NE(half, nullptr);
    EXPECT_EQ(half->size(), 2);
    // Ranks {1, 3} with keys {-1, -3}: rank 3 comes first.
    EXPECT_EQ(half->rank(), r < 2 ? 1 : 0);
    EXPECT_EQ(half->global_rank(0), r % 2 == 0 ? 2 : 3);
  });
  ::unlink(path);
}

}  // namespace
}  // namespace distcomm
