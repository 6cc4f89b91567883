#include "engine/server/http_server.h"

#include "engine/server/http_connection.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <pthread.h>

#include <algorithm>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "engine/server/metrics.h"
#include "engine/server/server_log.h"

namespace sparkglm::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

namespace {

// Connections answered 503 at --max-connections are few and short; beyond this many in flight
// they are closed without an answer.
constexpr int kMaxRejecting = 64;

}  // namespace

struct HttpServer::Impl {
  Impl(const HttpServerOptions& o, HttpHandler& h, Metrics* m)
      : state(o, h, m),
        // With one thread, asio may queue work posted from inside a handler without waking
        // anyone: the per-token hops between strands then cost no system call.
        ioc(o.io_threads <= 1 ? 1 : BOOST_ASIO_CONCURRENCY_HINT_DEFAULT),
        acceptor(net::make_strand(ioc)),
        retry(ioc) {}

  void accept();
  void on_accept(tcp::socket socket);

  // Declared first: connections still queued in the io_context touch it when they are destroyed.
  ListenerState state;
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor;
  net::steady_timer retry;  // backs off accepting when the process is out of descriptors
  std::vector<std::thread> threads;
  uint16_t port = 0;
};

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (ec == net::error::no_descriptors) {
      // Out of file descriptors: wait for some to be closed instead of spinning.
      retry.expires_after(std::chrono::milliseconds(100));
      retry.async_wait([this](error_code) {
        net::post(acceptor.get_executor(), [this] {
          if (acceptor.is_open()) accept();
        });
      });
      return;
    }
    if (!ec) on_accept(std::move(socket));
    accept();
  });
}

void HttpServer::Impl::on_accept(tcp::socket socket) {
  if (state.draining.load()) return;  // the socket closes as it goes out of scope
  const bool full = state.open.load() >= state.options.max_connections;
  if (full) {
    if (state.metrics) state.metrics->connection_rejected();
    if (state.rejecting.load() >= kMaxRejecting) return;
    state.rejecting.fetch_add(1);
  } else {
    state.open.fetch_add(1);
  }
  HttpConnection::serve(std::move(socket), state, full);
}

HttpServer::HttpServer(const HttpServerOptions& options, HttpHandler& handler, Metrics* metrics)
    : impl_(std::make_unique<Impl>(options, handler, metrics)) {}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::start() {
  Impl& s = *impl_;
  error_code ec;
  const auto address = net::ip::make_address(s.state.options.bind, ec);
  if (ec)
    throw Error(ErrorKind::kInvalidArgument, "--bind: not an IP address: " + s.state.options.bind);
  const tcp::endpoint ep(address, uint16_t(s.state.options.port));
  const std::string where = s.state.options.bind + ":" + std::to_string(s.state.options.port);
  s.acceptor.open(ep.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw Error(ErrorKind::kIo, "cannot listen on " + where + ": " + ec.message());
  s.port = s.acceptor.local_endpoint().port();
  s.work.emplace(s.ioc.get_executor());
  net::post(s.acceptor.get_executor(), [&s] { s.accept(); });
  const int n = std::max(1, s.state.options.io_threads);
  for (int i = 0; i < n; ++i)
    s.threads.emplace_back([&s] {
      pthread_setname_np(pthread_self(), "sparkglm-io");  // for per-thread CPU accounting
      // A handler that throws loses its own request, not the thread.
      for (;;) {
        try {
          s.ioc.run();
          return;
        } catch (const std::exception& e) {
          log_line(std::string("internal error in an I/O handler: ") + e.what());
        }
      }
    });
}

uint16_t HttpServer::port() const {
  return impl_->port;
}

void HttpServer::stop_accepting() {
  Impl& s = *impl_;
  if (s.state.draining.exchange(true)) return;
  net::post(s.acceptor.get_executor(), [&s] {
    error_code ec;
    s.acceptor.close(ec);
    s.retry.cancel();
  });
  std::vector<std::shared_ptr<HttpConnection>> live;
  {
    std::lock_guard<std::mutex> lock(s.state.mutex);
    for (auto& [ptr, weak] : s.state.connections)
      if (auto c = weak.lock()) live.push_back(std::move(c));
  }
  for (auto& c : live) c->close_if_idle();
}

bool HttpServer::draining() const {
  return impl_->state.draining.load();
}

bool HttpServer::wait_until_closed(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(impl_->state.mutex);
      if (impl_->state.connections.empty()) return true;
    }
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void HttpServer::stop() {
  Impl& s = *impl_;
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.threads)
    if (t.joinable()) t.join();
  s.threads.clear();
  s.state.handler.stop();
}

int HttpServer::open_connections() const {
  return impl_->state.open.load();
}

void HttpServer::run_ready_handlers() {
  try {
    impl_->ioc.poll();
  } catch (const std::exception& e) {
    log_line(std::string("internal error in an I/O handler: ") + e.what());
  }
}

}  // namespace sparkglm::server
