// A joiner of another job cannot join: the job's store (a real TCPStoreServer, as the
// launcher serves it) refuses its connection, naming both run ids, and the members go on.
// Two members train over gloo as threads of this process; the joiner's Manager connects
// with another job's identity.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "api/errors.h"
#include "api/plugin/plugin_registry.h"
#include "api/process/job_identity.h"
#include "api/store/server/tcp_store_server.h"
#include "api/store/tcp_store.h"
#include "ft/manager.h"
#include "tests/testing/require.h"

namespace distcomm {
namespace {

std::function<StorePtr()> client_of(int port, const JobIdentity& identity) {
  return [port, identity] {
    TCPStoreOptions so;
    so.host = "127.0.0.1";
    so.port = port;
    so.identity = identity;
    so.timeout = std::chrono::seconds(20);
    return std::make_shared<TCPStore>(so);
  };
}

TEST(JoinerIdentity, AJoinerOfAnotherJobIsRefusedNamingBothRunIdsAndTheMembersGoOn) {
  const PluginInfo& info = load_plugin("gloo");
  if (!info.available) DISTCOMM_SKIP_WITHOUT("gloo") << "the gloo backend cannot run here: " << info.unavailable_reason;
  TCPStoreServerOptions so;
  so.bind_address = "127.0.0.1";
  so.identity = {"job-a", "token-a"};
  TCPStoreServer server(so);
  server.start();

  auto options_for = [&](const std::string& id, bool joining, const JobIdentity& identity) {
    ft::ManagerOptions o;
    o.member_id = id;
    o.joining = joining;
    o.initial_members = 2;
    o.backend = "gloo";
    o.state_signature = "toy [4] f32";
    o.op_timeout = std::chrono::seconds(30);
    o.connect = client_of(server.port(), identity);
    return o;
  };
  std::vector<float> finals(2, 0.0f);
  std::vector<std::thread> members;
  for (int k = 0; k < 2; ++k) {
    members.emplace_back([&, k] {
      ft::Manager manager(options_for("rank" + std::to_string(k), false, so.identity));
      Tensor state = Tensor::of<float>({0, 0, 0, 0});
      while (manager.committed_steps() < 20) {
        ProcessGroupPtr pg = manager.begin_step({&state});
        Tensor step = Tensor::of<float>({1, 1, 1, 1});
        try {
          pg->all_reduce(step)->wait();
        } catch (const Error& e) {
          manager.step_failed(e.what());
        }
        if (manager.commit()) {
          for (int i = 0; i < 4; ++i) static_cast<float*>(state.data())[i] += static_cast<float*>(step.data())[i];
        }
      }
      finals[static_cast<size_t>(k)] = static_cast<float*>(state.data())[0];
    });
  }
  std::string refusal;
  try {
    ft::Manager joiner(options_for("joiner", true, {"job-b", "token-b"}));
  } catch (const StoreError& e) {
    refusal = e.what();
  }
  for (std::thread& t : members) t.join();
  EXPECT_NE(refusal.find("job-a"), std::string::npos) << "the store's run id is named: " << refusal;
  EXPECT_NE(refusal.find("job-b"), std::string::npos) << "the joiner's run id is named: " << refusal;
  // Every step committed by both, with both contributions: 20 steps of 2.
  EXPECT_EQ(finals, (std::vector<float>{40.0f, 40.0f}));
}

}  // namespace
}  // namespace distcomm
