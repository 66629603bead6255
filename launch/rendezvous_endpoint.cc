#include "launch/rendezvous_endpoint.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "api/errors.h"
#include "api/store/internal/name_lookup.h"
#include "api/store/tcp_store.h"
#include "launch/duration_text.h"

namespace distcomm {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;

// host:port's addresses, looked up within `wait` (name_lookup.h): a DNS server that does
// not answer would otherwise hold the launcher for the resolver's timeouts.
internal::NameLookup addresses_of(const std::string& host, int port, std::chrono::milliseconds wait) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  return internal::look_up(host, std::to_string(port), hints, Clock::now() + wait);
}

// Whether host names an address of this machine: binding a socket to it (port 0) works. A
// name not looked up within `wait` is an error: taken for another machine's, the endpoint's
// own launcher would serve no store, and every launcher would wait out its timeout blaming
// the endpoint's host.
bool is_this_host(const std::string& host, std::chrono::milliseconds wait) {
  bool local = false;
  const internal::NameLookup found = addresses_of(host, 0, wait);
  if (found.timed_out) {
    throw std::runtime_error("cannot tell whether this host is the rendezvous endpoint '" + host + "': " +
                             found.error + " (--rdzv_timeout_s)");
  }
  for (const addrinfo* a = found.found.get(); a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    local = local || ::bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    ::close(fd);
  }
  return local;
}

// Whether something accepts TCP connections at host:port within `wait`; `error` says what
// went wrong otherwise.
bool accepts_connections(const std::string& host, int port, std::chrono::milliseconds wait, std::string* error) {
  bool ok = false;
  const internal::NameLookup found = addresses_of(host, port, wait);
  if (!found.found) *error = "cannot resolve '" + host + "': " + found.error;
  for (const addrinfo* a = found.found.get(); a != nullptr && !ok; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      if (::poll(&p, 1, static_cast<int>(wait.count())) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0) {
        ok = err == 0;
        if (!ok) *error = std::strerror(err);
      } else {
        *error = "no answer within " + seconds_text(wait);
      }
    } else {
      *error = std::strerror(errno);
    }
    ::close(fd);
  }
  return ok;
}

// Whether host:port refuses connections (nothing listens there: the store's launcher
// ended), as against not answering, or not being reached (a network cut).
bool refuses_connections(const std::string& host, int port) {
  std::string error;
  if (accepts_connections(host, port, std::chrono::milliseconds(500), &error)) return false;
  return error == std::strerror(ECONNREFUSED);
}

// After this long without an answer a client says that it still tries.
constexpr std::chrono::seconds kSayAfter{10};
// How long one try of a request waits for the store (client()).
constexpr std::chrono::seconds kTryTimeout{3};
// Between tries of a request the store did not answer.
constexpr std::chrono::milliseconds kRetryPause{200};

// "13:05:42": the wall-clock time `after` from now, for a deadline in a message.
std::string clock_time_after(Clock::duration after) {
  const std::time_t t = std::chrono::system_clock::to_time_t(
      std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(after));
  std::tm local{};
  ::localtime_r(&t, &local);
  char text[32] = {0};
  std::strftime(text, sizeof(text), "%H:%M:%S", &local);
  return text;
}

std::chrono::milliseconds ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

}  // namespace

// What the clients of one endpoint share about the store not answering: one line when a
// wait begins, one when it ends, however many clients wait.
struct RendezvousEndpoint::Outage {
  std::mutex mu;
  std::function<void(const std::string&)> say;
  bool said = false;
  Clock::time_point since;  // the start of the oldest request still waiting, once said
  bool given_up = false;
  // Why, once given_up: what every client's request that then finds the store silent says
  // (after the first to time out, the others' last tries' errors would read as a store
  // whose launcher ended).
  std::string why_given_up;
  bool silent = false;  // the last request of any client had no answer
};

namespace {

// A TCPStore client that outlasts a store that does not answer for a while (see
// connect_again()). Each request is made on a new connection after a failure: the
// TCPStore takes a server that closed a connection for gone for good.
class PatientStore : public Store {
 public:
  PatientStore(std::function<std::unique_ptr<Store>()> connect, std::shared_ptr<RendezvousEndpoint::Outage> outage,
               const ElasticOptions& options, std::function<bool()> give_up)
      : connect_(std::move(connect)), outage_(std::move(outage)), options_(options), give_up_(std::move(give_up)) {
    // A store that refuses this launcher (another job's, a wrong token) says so here, at
    // once. One that does not answer is connected at the first request, within its
    // patience: a round watch or a heartbeat made while the store is silent waits it out
    // too, rather than ending the launcher (or its beats).
    try {
      store_ = connect_();
    } catch (const Timeout&) {
    }
  }

  void set(const std::string& key, const Bytes& value) override {
    patiently([&](Store& s) { s.set(key, value); return 0; });
  }
  Bytes get(const std::string& key) override {
    return patiently([&](Store& s) { return s.get(key); });
  }
  // Tried again, a delta may be added twice: the rendezvous adds only to heartbeats.
  int64_t add(const std::string& key, int64_t delta) override {
    return patiently([&](Store& s) { return s.add(key, delta); });
  }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return patiently([&](Store& s) { return s.compare_set(key, expected, desired); });
  }
  bool check(const std::vector<std::string>& keys) override {
    return patiently([&](Store& s) { return s.check(keys); });
  }
  // No rendezvous code waits on keys: a wait's own Timeout (the keys did not come) would be
  // taken here for a store that does not answer, and tried again until the deadline.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    patiently([&](Store& s) { s.wait(keys, timeout); return 0; });
  }
  bool delete_key(const std::string& key) override {
    return patiently([&](Store& s) { return s.delete_key(key); });
  }
  int64_t num_keys() override {
    return patiently([&](Store& s) { return s.num_keys(); });
  }

 private:
  std::string where() const {
    return "the rendezvous store at " + options_.endpoint_host + ":" + std::to_string(options_.endpoint_port);
  }
  bool giving_up() {
    {
      std::lock_guard<std::mutex> lock(outage_->mu);
      if (outage_->given_up) return true;
    }
    return give_up_ && give_up_();
  }
  // Why no request waits for the store any more (giving_up()), after where().
  std::string why_given_up() {
    std::lock_guard<std::mutex> lock(outage_->mu);
    return outage_->given_up ? outage_->why_given_up : " does not answer (not asked again: asked to stop)";
  }

  template <class Op>
  auto patiently(Op op) -> decltype(op(std::declval<Store&>())) {
    const auto began = Clock::now();
    while (true) {
      if (giving_up()) {
        // Leaving while the store does not answer: no request waits for it again.
        bool silent = false;
        {
          std::lock_guard<std::mutex> lock(outage_->mu);
          silent = outage_->silent;
        }
        if (silent) throw StoreSilent(where() + why_given_up());
      }
      try {
        if (!store_) store_ = connect_();
        auto result = op(*store_);
        answered();
        return result;
      } catch (const InvalidArgument&) {
        throw;  // the store answered: a refusal, not a silence
      } catch (const StoreRefused&) {
        throw;  // answered at last, by a store that is not this job's (restarted by another job?)
      } catch (const Error&) {
        store_.reset();
        if (refuses_connections(options_.endpoint_host, options_.endpoint_port)) throw;
        {
          std::lock_guard<std::mutex> lock(outage_->mu);
          outage_->silent = true;
        }
        // Silent still: a StoreSilent, which says why it is not asked again (a raw error of
        // the last try would be read as nothing listening at the endpoint).
        if (giving_up()) throw StoreSilent(where() + why_given_up() + "; the last try: " + local_what());
        if (Clock::now() - began >= options_.timeout) {
          const std::string why = " has not answered for " + seconds_text(ms_since(began)) +
                                  " (--rdzv_timeout_s=" + seconds_text(options_.timeout) + ")";
          {
            std::lock_guard<std::mutex> lock(outage_->mu);
            if (!outage_->given_up) outage_->why_given_up = why;
            outage_->given_up = true;
          }
          throw StoreSilent(where() + why + "; the last try: " + local_what());
        }
        note_waiting(began);
        for (auto until = Clock::now() + kRetryPause; Clock::now() < until && !giving_up();) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
    }
  }

  static std::string local_what() {
    try {
      throw;
    } catch (const std::exception& e) {
      return e.what();
    }
  }

  // The lines are said outside the lock: a launcher whose output pipe is full must not hold
  // up its other clients' requests too.
  void note_waiting(Clock::time_point began) {
    std::function<void(const std::string&)> say;
    {
      std::lock_guard<std::mutex> lock(outage_->mu);
      if (outage_->said || Clock::now() - began < kSayAfter) return;
      outage_->said = true;
      outage_->since = began;
      say = outage_->say;
    }
    if (say) {
      say(where() + " has not answered for " + seconds_text(ms_since(began)) + "; still trying until " +
          clock_time_after(began + options_.timeout - Clock::now()) + " (--rdzv_timeout_s=" +
          seconds_text(options_.timeout) + ")");
    }
  }

  void answered() {
    std::function<void(const std::string&)> say;
    Clock::time_point since;
    {
      std::lock_guard<std::mutex> lock(outage_->mu);
      outage_->silent = false;
      if (!outage_->said) return;
      outage_->said = false;
      since = outage_->since;
      say = outage_->say;
    }
    if (say) say(where() + " answers again, after " + seconds_text(ms_since(since)));
  }

  const std::function<std::unique_ptr<Store>()> connect_;
  const std::shared_ptr<RendezvousEndpoint::Outage> outage_;
  const ElasticOptions options_;
  const std::function<bool()> give_up_;
  std::unique_ptr<Store> store_;
};

}  // namespace

RendezvousEndpoint::RendezvousEndpoint(const ElasticOptions& options, const std::string& token)
    : options_(options), identity_{"rdzv-" + options.rdzv_id, token}, outage_(std::make_shared<Outage>()) {
  if (!is_this_host(options.endpoint_host, options.timeout)) return;
  TCPStoreServerOptions server;
  server.bind_address = options.endpoint_host;
  server.port = options.endpoint_port;
  server.identity = identity_;
  auto candidate = std::make_unique<TCPStoreServer>(server);
  try {
    candidate->start();
    server_ = std::move(candidate);
  } catch (const StoreError&) {
    // The port is taken: most likely by the launcher of this job that serves the store
    // (connect() finds out, and says so when it is another job or another program).
  }
}

RendezvousEndpoint::~RendezvousEndpoint() {
  if (server_) server_->stop();
}

std::unique_ptr<Store> RendezvousEndpoint::connect(const std::function<bool()>& interrupted,
                                                   const std::function<void(const std::string&)>& say) {
  const std::string endpoint = "--rdzv_endpoint=" + options_.endpoint_host + ":" + std::to_string(options_.endpoint_port);
  const auto start = Clock::now();
  const auto deadline = start + options_.timeout;
  auto next_word = start + std::chrono::seconds(10);
  std::string error;
  int tries = 0;
  while (!accepts_connections(options_.endpoint_host, options_.endpoint_port, std::chrono::milliseconds(500), &error)) {
    ++tries;
    if (interrupted()) return nullptr;
    if (say && Clock::now() >= next_word && Clock::now() < deadline) {
      say(endpoint + ": no rendezvous store there yet (" + error + ") after " + seconds_text(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start)) +
          "; trying until --rdzv_timeout_s=" + seconds_text(options_.timeout) +
          " (is the launcher of the endpoint's host running?)");
      next_word = Clock::now() + std::chrono::seconds(30);
    }
    if (Clock::now() >= deadline) {
      throw std::runtime_error(endpoint + ": cannot reach the rendezvous store: " + std::to_string(tries) +
                               " connection attempts in " + seconds_text(options_.timeout) +
                               " (--rdzv_timeout_s), the last one: " + error +
                               "; is the launcher of the endpoint's host running?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  {
    std::lock_guard<std::mutex> lock(outage_->mu);
    outage_->say = say;
  }
  try {
    return connect_again(interrupted);
  } catch (const Error& e) {
    throw std::runtime_error(endpoint + ": the rendezvous store refused this launcher: " + e.what() +
                             elastic_refusal_advice(e.what(), options_));
  }
}

std::string elastic_refusal_advice(const std::string& refusal, const ElasticOptions& options) {
  const std::string endpoint = options.endpoint_host + ":" + std::to_string(options.endpoint_port);
  if (refusal.find("belongs to another job") != std::string::npos) {
    return "; for an elastic job: another job's rendezvous (another --rdzv_id than this launcher's " +
           options.rdzv_id + ") is served at " + endpoint +
           ": give each job its own --rdzv_endpoint port, and every node's launcher of a job the same --rdzv_id";
  }
  if (refusal.find("store token") != std::string::npos) {
    return std::string("; for an elastic job: every node's launcher needs the same ") + kStoreTokenVariable +
           " as the launcher serving the rendezvous at " + endpoint;
  }
  return "";
}

std::unique_ptr<Store> RendezvousEndpoint::connect_again(const std::function<bool()>& give_up) const {
  return std::make_unique<PatientStore>([this] { return client(); }, outage_, options_, give_up);
}

void RendezvousEndpoint::give_up_retrying() {
  std::lock_guard<std::mutex> lock(outage_->mu);
  // A timeout that came first stays the reason: it is why the launcher leaves.
  if (!outage_->given_up) outage_->why_given_up = " does not answer (not asked again: this launcher is leaving)";
  outage_->given_up = true;
}

bool RendezvousEndpoint::silent() const {
  std::lock_guard<std::mutex> lock(outage_->mu);
  return outage_->silent;
}

std::unique_ptr<Store> RendezvousEndpoint::client() const {
  TCPStoreOptions client;
  client.host = options_.endpoint_host;
  client.port = options_.endpoint_port;
  client.identity = identity_;
  // One try's bound (connect, handshake, request): the rendezvous' requests are small, so a
  // store that has not answered in 3 s is taken as silent and asked again on a new
  // connection (see PatientStore), and a Ctrl-C during an outage waits no more than a try.
  client.timeout = kTryTimeout;
  return std::make_unique<TCPStore>(client);
}

}  // namespace launch
}  // namespace distcomm
