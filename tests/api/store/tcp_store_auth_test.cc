// A TCPStore admits only its own job: the run id and the token, proven without sending it,
// checked both ways; and it listens only where it is asked to.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "api/errors.h"
#include "api/store/internal/store_handshake.h"
#include "api/store/tcp_store.h"
#include "tests/api/store/store_test_util.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using namespace testing;

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<TCPStore>(server_of(job_));
    server_->set("secret/key", "job A's value");
  }
  int port() const { return server_->port(); }
  std::string where() const { return "127.0.0.1:" + std::to_string(port()); }

  const JobIdentity job_ = new_job_identity();
  std::unique_ptr<TCPStore> server_;
};

TEST_F(AuthTest, TheJobsOwnRanksAreAdmitted) {
  TCPStore rank1(client_of(port(), kTestTimeout, job_));
  EXPECT_EQ(rank1.get_string("secret/key"), "job A's value");
}

TEST_F(AuthTest, AWrongTokenIsRefusedAtOnce) {
  const JobIdentity wrong{job_.run_id, new_job_identity().token};
  const auto [message, took] = error_of<StoreRefused>([&] { TCPStore s(client_of(port(), kTestTimeout, wrong)); });
  EXPECT_NE(message.find("the store at " + where() + " (run id " + job_.run_id +
                         ") refused this connection: wrong store token"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("every rank needs rank 0's DISTCOMM_STORE_TOKEN"), std::string::npos) << message;
  EXPECT_LT(took, kAtOnce);
  // The refusal left the job's store as it was.
  EXPECT_EQ(TCPStore(client_of(port(), kTestTimeout, job_)).get_string("secret/key"), "job A's value");
}

TEST_F(AuthTest, AnotherJobsRunIdIsRefusedNamingBoth) {
  const JobIdentity other = new_job_identity();
  const auto [message, took] = error_of<StoreRefused>([&] { TCPStore s(client_of(port(), kTestTimeout, other)); });
  EXPECT_NE(message.find("the store at " + where() + " belongs to another job (run id " + job_.run_id +
                         "; this rank has run id " + other.run_id + ")"),
            std::string::npos)
      << message;
  EXPECT_LT(took, kAtOnce);
}

TEST_F(AuthTest, ARankWithoutIdentityIsRefused) {
  const auto [message, took] = error_of<StoreRefused>([&] { TCPStore s(client_of(port())); });
  EXPECT_NE(message.find("belongs to another job (run id " + job_.run_id + "; this rank has no run id)"),
            std::string::npos)
      << message;
  // The right run id without the token.
  const auto [no_token, took2] =
      error_of<StoreRefused>([&] { TCPStore s(client_of(port(), kTestTimeout, {job_.run_id, ""})); });
  EXPECT_NE(no_token.find("asks for a store token and this rank has none"), std::string::npos) << no_token;
}

// Ranks that count another world size would wait for each other until their timeout (a
// launcher given another --nproc_per_node): the store refuses them at once, naming both.
TEST(Auth, AClientOfAnotherWorldSizeIsRefusedNamingBoth) {
  const JobIdentity job = new_job_identity();
  TCPStoreOptions so = server_of(job);
  so.num_workers = 4;
  TCPStore server(so);
  TCPStoreOptions six = client_of(server.port(), kTestTimeout, job);
  six.num_workers = 6;
  const auto [message, took] = error_of<StoreRefused>([&] { TCPStore s(six); });
  EXPECT_NE(message.find("refused this connection: this store serves a job of 4 ranks, and the client at 127.0.0.1:"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(" says its job has 6: every rank needs the same WORLD_SIZE"), std::string::npos) << message;
  EXPECT_LT(took, kAtOnce);
  // The same world size, or none (a tool's, a launcher's), is admitted.
  TCPStoreOptions four = six;
  four.num_workers = 4;
  EXPECT_NO_THROW(TCPStore{four});
  EXPECT_NO_THROW(TCPStore{client_of(server.port(), kTestTimeout, job)});
}

// Once a client of the job (it proved the token) is refused for another world size, the
// job cannot run: a wait on a key that is missing ends at once with InvalidArgument saying
// why, parked or later; keys that exist are still read, and writes still succeed.
TEST(Auth, AfterAWorldSizeRefusalEveryWaitSaysTheJobCannotRun) {
  const JobIdentity job = new_job_identity();
  TCPStoreOptions so = server_of(job);
  so.num_workers = 2;
  TCPStore server(so);
  server.set("there", "yes");
  TCPStoreOptions two = client_of(server.port(), kTestTimeout, job);
  two.num_workers = 2;
  TCPStore waiter(two);
  std::pair<std::string, std::chrono::milliseconds> parked;
  std::thread t([&] { parked = error_of<InvalidArgument>([&] { waiter.wait({"never"}, 20s); }); });
  std::this_thread::sleep_for(300ms);  // parked on the server by now
  TCPStoreOptions three = two;
  three.num_workers = 3;
  EXPECT_THROW(TCPStore{three}, StoreRefused);
  t.join();
  EXPECT_NE(parked.first.find("the job cannot run: this store serves a job of 2 ranks, and the client at 127.0.0.1:"),
            std::string::npos)
      << parked.first;
  EXPECT_NE(parked.first.find(" says its job has 3"), std::string::npos) << parked.first;
  EXPECT_LT(parked.second, kAtOnce);
  const auto [later, took] = error_of<InvalidArgument>([&] { server.get("missing"); });
  EXPECT_NE(later.find("the job cannot run: "), std::string::npos) << later;
  EXPECT_LT(took, kAtOnce);
  EXPECT_EQ(server.get_string("there"), "yes");
  EXPECT_NO_THROW(server.set("written", "still"));
  EXPECT_NO_THROW(waiter.wait({"written"}, 1s));
}

// A client that does not know the token cannot end the job's waits by naming another world
// size: it is refused for the token, and the waits go on.
TEST(Auth, AStrangerNamingAnotherWorldSizeEndsNoWait) {
  const JobIdentity job = new_job_identity();
  TCPStoreOptions so = server_of(job);
  so.num_workers = 2;
  TCPStore server(so);
  TCPStoreOptions two = client_of(server.port(), kTestTimeout, job);
  two.num_workers = 2;
  TCPStore waiter(two);
  bool got = false;
  std::thread t([&] {
    waiter.wait({"later"}, 20s);
    got = true;
  });
  std::this_thread::sleep_for(300ms);
  TCPStoreOptions stranger = client_of(server.port(), kTestTimeout, {job.run_id, "not the token"});
  stranger.num_workers = 3;
  const auto [message, took] = error_of<StoreRefused>([&] { TCPStore s(stranger); });
  EXPECT_NE(message.find("wrong store token"), std::string::npos) << message;
  server.set("later", "1");
  t.join();
  EXPECT_TRUE(got);
}

// A rank whose store server ended and whose port another job's store then took: its next
// call reconnects and is refused. That refusal kept no type of its own ("taken as gone"),
// so nothing above could tell it from a store that went away.
TEST(Auth, ARefusalOnReconnectStaysARefusal) {
  const JobIdentity job = new_job_identity();
  auto ours = std::make_unique<TCPStore>(server_of(job));
  const int port = ours->port();
  TCPStore rank1(client_of(port, kTestTimeout, job));
  rank1.set("k", "v");
  ours.reset();  // the server ends: its clients' connections close
  TCPStore theirs(server_of(new_job_identity(), port));
  try {
    rank1.get("k");  // finds its connection closed ("did the server process exit?")
  } catch (const StoreError&) {
  }
  try {
    rank1.get("k");  // connects again, to the other job's store
    FAIL() << "another job's store answered";
  } catch (const StoreRefused& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to another job"), std::string::npos) << e.what();
  } catch (const StoreError& e) {
    FAIL() << "not a StoreRefused: " << e.what();
  }
}

TEST(Auth, ARankWithATokenRefusesAStoreWithout) {
  TCPStore open_store(server_of());
  const auto [message, took] =
      error_of<StoreRefused>([&] { TCPStore s(client_of(open_store.port(), kTestTimeout, {"", "a token"})); });
  EXPECT_NE(message.find("has no store token but this rank has one"), std::string::npos) << message;
}

// A stand-in for rank 0 that does not know the token: it answers HELLO as the server
// would, then sends a made-up proof. It records everything the client sent.
class ImpostorServer {
 public:
  explicit ImpostorServer(const JobIdentity& claimed) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(listener_, 1) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error("impostor cannot listen");
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, claimed] { serve_one(claimed); });
  }
  ~ImpostorServer() { finish(); }
  int port() const { return port_; }
  // Everything the client sent, once it is done.
  std::string finish() {
    if (thread_.joinable()) thread_.join();
    if (listener_ >= 0) close(listener_);
    listener_ = -1;
    return received_;
  }

 private:
  void serve_one(const JobIdentity& claimed) {
    const int fd = accept(listener_, nullptr, nullptr);
    const auto deadline = Clock::now() + kTestTimeout;
    auto read_message = [&] {
      uint8_t header[5];
      if (internal::recv_all(fd, header, 5, deadline) != internal::IoStatus::kOk) return;
      received_.append(reinterpret_cast<char*>(header), 5);
      for (uint32_t i = 0; i < internal::get_u32(header + 1); ++i) {
        uint8_t len[4];
        if (internal::recv_all(fd, len, 4, deadline) != internal::IoStatus::kOk) return;
        std::string field(internal::get_u32(len), '\0');
        if (internal::recv_all(fd, field.data(), field.size(), deadline) != internal::IoStatus::kOk) return;
        received_.append(reinterpret_cast<char*>(len), 4).append(field);
      }
    };
    auto send_reply = [&](const Store::Bytes& payload) {
      Store::Bytes r = internal::encode_reply_header(internal::Status::kOk, payload.size());
      r.insert(r.end(), payload.begin(), payload.end());
      internal::send_all(fd, r.data(), r.size(), deadline);
    };
    read_message();
    send_reply(internal::encode_server_hello({claimed.run_id, std::string(32, 'n'), true, 1 << 20}));
    read_message();
    send_reply(Store::Bytes(32, 0));
    close(fd);
  }

  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string received_;
};

TEST(Auth, TheServerMustProveTheTokenTooAndTheTokenNeverCrossesTheWire) {
  const JobIdentity job = new_job_identity();
  ImpostorServer impostor(job);
  const auto [message, took] = error_of<StoreRefused>([&] { TCPStore s(client_of(impostor.port(), kTestTimeout, job)); });
  EXPECT_NE(message.find("did not prove that it knows the store token: something other than this job's rank 0 "
                         "serves this port"),
            std::string::npos)
      << message;
  const std::string sent = impostor.finish();
  EXPECT_NE(sent.find(job.run_id), std::string::npos) << "the client names its run id";
  EXPECT_EQ(sent.find(job.token), std::string::npos) << "the token itself went over the wire";
  // HELLO (magic, run id, nonce, world size) and PROVE (a 32-byte proof), nothing else.
  EXPECT_EQ(sent.size(), (5 + 4 + 16 + 4 + job.run_id.size() + 4 + 32 + 4 + 8) + (5 + 4 + 32));
}

// What a client that watched a connection could try: the same client nonce, the proof it
// saw. The server's fresh nonce makes the proof worthless.
TEST_F(AuthTest, ARecordedProofIsUselessOnAnotherConnection) {
  const std::string client_nonce(32, 'c');
  const auto deadline = Clock::now() + kTestTimeout;
  auto hello = [&](RawClient& raw) {
    const Store::Bytes h = internal::encode_client_hello({job_.run_id, client_nonce});
    EXPECT_EQ(internal::send_all(raw.fd(), h.data(), h.size(), deadline), internal::IoStatus::kOk);
    internal::Reply reply;
    EXPECT_EQ(internal::recv_reply(raw.fd(), &reply, 1024, deadline), internal::IoStatus::kOk);
    internal::ServerHello theirs;
    EXPECT_TRUE(internal::parse_server_hello(reply.payload, &theirs));
    return theirs.nonce;
  };
  auto prove = [&](RawClient& raw, const internal::Digest& proof) {
    const Store::Bytes p =
        internal::encode_message(10, {internal::FieldRef(proof.data(), proof.size())});
    EXPECT_EQ(internal::send_all(raw.fd(), p.data(), p.size(), deadline), internal::IoStatus::kOk);
    internal::Reply reply;
    EXPECT_EQ(internal::recv_reply(raw.fd(), &reply, 1024, deadline), internal::IoStatus::kOk);
    return reply;
  };
  RawClient watched(port());
  const std::string server_nonce = hello(watched);
  const internal::Digest proof =
      internal::handshake_proof(internal::Prover::kClient, job_.token, job_.run_id, client_nonce, server_nonce);
  EXPECT_EQ(prove(watched, proof).status, internal::Status::kOk);

  RawClient replay(port());
  EXPECT_NE(hello(replay), server_nonce);
  const internal::Reply refused = prove(replay, proof);
  EXPECT_EQ(refused.status, internal::Status::kError);
  EXPECT_EQ(to_string(refused.payload), "wrong store token");
  EXPECT_TRUE(replay.closed_by_server());
}

// ---------------------------------------------------------------------------------------
// Where the server listens. The whole of 127.0.0.0/8 reaches this host, so 127.0.0.2 is
// "another interface" without a network of its own.

TCPStoreOptions client_via(const std::string& host, int port) {
  TCPStoreOptions o = client_of(port, 300ms);
  o.host = host;
  return o;
}

TEST(Listen, OnTheMasterAddressOnlyUnlessAskedOtherwise) {
  TCPStore on_host(server_of());  // host 127.0.0.1: listens there only
  EXPECT_NO_THROW(TCPStore(client_via("127.0.0.1", on_host.port())));
  const auto [message, took] = error_of<StoreError>([&] { TCPStore s(client_via("127.0.0.2", on_host.port())); });
  EXPECT_NE(message.find("Connection refused"), std::string::npos) << message;

  TCPStoreOptions everywhere = server_of();
  everywhere.bind_address = "*";
  TCPStore all(everywhere);
  EXPECT_NO_THROW(TCPStore(client_via("127.0.0.2", all.port())));
  EXPECT_NO_THROW(TCPStore(client_via("127.0.0.1", all.port())));

  TCPStoreOptions elsewhere = server_of();
  elsewhere.bind_address = "127.0.0.2";  // an override wins over host
  TCPStore other(elsewhere);
  EXPECT_NO_THROW(TCPStore(client_via("127.0.0.2", other.port())));
  EXPECT_THROW(TCPStore(client_via("127.0.0.1", other.port())), StoreError);
}

TEST(Listen, APortInUseAndAnAddressOfAnotherHostAreClearErrors) {
  TCPStore first(server_of());
  const auto [in_use, took] = error_of<StoreError>([&] { TCPStore second(server_of({}, first.port())); });
  EXPECT_NE(in_use.find("cannot listen on 127.0.0.1:" + std::to_string(first.port()) +
                        ": Address already in use; another job (or another program) is using port " +
                        std::to_string(first.port())),
            std::string::npos)
      << in_use;
  TCPStoreOptions remote = server_of();
  remote.host = "192.0.2.1";  // TEST-NET-1: never an address of this host
  const auto [not_here, took2] = error_of<StoreError>([&] { TCPStore s(remote); });
  EXPECT_NE(not_here.find("'192.0.2.1' is not an address of this host: the job's store listens on MASTER_ADDR"),
            std::string::npos)
      << not_here;
  // A bind address that is not this host's is named as what it is, not as MASTER_ADDR
  // (helper-73: DISTCOMM_STORE_BIND's mistake was blamed on MASTER_ADDR, with the advice to
  // set DISTCOMM_STORE_BIND).
  TCPStoreOptions bound = server_of();
  bound.bind_address = "192.0.2.1";
  const auto [bad_bind, took3] = error_of<StoreError>([&] { TCPStore s(bound); });
  EXPECT_NE(bad_bind.find("'192.0.2.1', from the store's bind address (DISTCOMM_STORE_BIND, "
                          "TCPStoreOptions::bind_address), is not an address of this host"),
            std::string::npos)
      << bad_bind;
  EXPECT_EQ(bad_bind.find("MASTER_ADDR, which"), std::string::npos) << bad_bind;
}

}  // namespace
}  // namespace distcomm
