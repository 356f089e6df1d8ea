// HTTP/1.1 frontend: connection handling (keep-alive, pipelining, chunked bodies, Expect,
// limits, timeouts) and the v2 endpoints of v2-protocol §1. The same session type serves the
// metrics port.
#include "server.hpp"
#include "service.hpp"

#include <inferwire/http/compression.hpp>
#include <inferwire/http/route.hpp>
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/json.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json/serialize.hpp>

#include <array>
#include <chrono>
#include <new>

#include <sys/mman.h>
#include <limits>

namespace inferwire::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using inferwire::http::endpoint;

namespace {

constexpr std::size_t header_limit = 64 * 1024;
constexpr std::size_t max_chunks = 65536;
// Nesting allowed in control bodies (repository index), far above the infer body's limit but
// low enough that freeing the parsed value cannot exhaust an I/O thread's stack.
constexpr std::size_t control_json_depth = 10000;
// A connection that makes no progress for this long (while the server is not working on its
// request) is closed: idle keep-alive connections and stalled clients alike.
constexpr auto stall_timeout = std::chrono::seconds(120);
constexpr auto watchdog_period = std::chrono::seconds(5);
// Bodies at least this large are read straight into their final buffer.
constexpr std::uint64_t direct_body_threshold = 256 * 1024;

/// What a handler answers. Body parts after `body` are views kept alive by `owner`.
struct reply {
  unsigned status = 200;
  std::string content_type;
  std::vector<std::pair<std::string, std::string>> fields;
  std::string body;
  std::vector<net::const_buffer> extra;
  std::shared_ptr<void> owner;
  bool close = false;
};

reply json_reply(std::string body, unsigned status = 200) {
  reply r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(body);
  return r;
}

reply error_reply(unsigned code, std::string_view message) {
  return json_reply(v2::error_body(quote_input(message, max_error_text)), code);
}
reply error_reply(const status& st) {
  return error_reply(static_cast<unsigned>(st.http_status()), st.message());
}
reply empty_reply(unsigned code) {
  reply r;
  r.status = code;
  return r;
}

/// Asio's transfer_all caps each read_some/write_some at 64 KiB; large bodies go in as few
/// system calls as the socket allows.
inline std::size_t transfer_all_unbounded(const boost::system::error_code& ec, std::size_t) {
  return ec ? 0 : std::numeric_limits<std::size_t>::max();
}

/// The body of requests read by the parser (small bodies, chunked bodies): a string that grows
/// as bytes arrive. Beast's string_body reserves the whole announced Content-Length up front,
/// which would let a client that sends nothing make the server allocate a gigabyte.
struct growing_body {
  using value_type = std::string;
  static std::uint64_t size(const value_type& v) noexcept { return v.size(); }
  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(bhttp::header<isRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>& length, beast::error_code& ec) {
      constexpr std::uint64_t first = 64 * 1024;
      if (length) body_.reserve(static_cast<std::size_t>(std::min(*length, first)));
      ec = {};
    }
    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, beast::error_code& ec) {
      const std::size_t n = net::buffer_size(buffers);
      const std::size_t have = body_.size();
      body_.resize(have + n);  // geometric growth
      ec = {};
      return net::buffer_copy(net::buffer(body_.data() + have, n), buffers);
    }
    void finish(beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};
using request_t = bhttp::request<growing_body>;

/// A request body read outside the parser (large bodies). Memory follows the bytes received,
/// never the length announced: the buffer starts small and doubles as bytes arrive (an
/// anonymous mapping grown with mremap, so growing never copies), each new part is populated
/// in one call (far cheaper than faulting pages in while recv copies into them), and every
/// byte of capacity is charged to the server's in-flight budget until the request is done.
class body_buffer {
 public:
  static constexpr std::size_t first_capacity = std::size_t{64} << 10;

  body_buffer(std::size_t length, byte_budget& budget) : length_(length), charge_(budget) {}
  ~body_buffer() {
    if (data_) ::munmap(data_, capacity_);
  }
  body_buffer(const body_buffer&) = delete;
  body_buffer& operator=(const body_buffer&) = delete;

  /// Makes room for more bytes (at least one): false when the budget or the system refuses.
  bool grow() {
    const std::size_t want =
        std::min(length_, std::max(first_capacity, capacity_ > length_ / 2 ? length_ : 2 * capacity_));
    if (want <= capacity_ || !charge_.add(want - capacity_)) return false;
    void* p = data_ ? ::mremap(data_, capacity_, want, MREMAP_MAYMOVE)
                    : ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      charge_.sub(want - capacity_);
      return false;
    }
    char* fresh = static_cast<char*>(p) + capacity_;
    const std::size_t n = want - capacity_;
    ::madvise(fresh, n, MADV_HUGEPAGE);  // where the kernel allows them
#ifdef MADV_POPULATE_WRITE
    if (::madvise(fresh, n, MADV_POPULATE_WRITE) != 0)
#endif
      for (std::size_t i = 0; i < n; i += 4096) fresh[i] = 0;
    data_ = static_cast<char*>(p);
    capacity_ = want;
    return true;
  }
  /// Where the next bytes go, and how many fit without growing.
  net::mutable_buffer free_space() noexcept { return {data_ + filled_, capacity_ - filled_}; }
  void commit(std::size_t n) noexcept { filled_ += n; }
  bool complete() const noexcept { return filled_ == length_; }
  bool full() const noexcept { return filled_ == capacity_; }
  bool empty_capacity() const noexcept { return capacity_ == 0; }
  std::string_view view() const noexcept { return {data_, filled_}; }

 private:
  char* data_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t filled_ = 0;
  std::size_t length_;
  byte_budget::charge charge_;
};

/// An infer request in flight: the service's call (its shared-memory places hold their regions
/// until the reply is sent) and the HTTP request that owns the bytes every view points into.
struct infer_job : infer_call {
  request_t req;
  std::shared_ptr<body_buffer> big_body;
  std::string inflated;
  v2::encoded_body encoded;
};

std::string iso_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket socket, server_state& s, bool metrics)
      : socket_(std::move(socket)), watchdog_(socket_.get_executor()), s_(s), svc_(s), metrics_(metrics) {
    chunk_cb_ = [this](std::uint64_t size, std::string_view, beast::error_code& ec) {
      if (size > 0 && ++chunks_ > max_chunks) {
        chunk_overflow_ = true;
        ec = bhttp::error::body_limit;
      } else if (size > 0 && !body_charge_.add(size)) {
        budget_refused_ = true;
        ec = bhttp::error::body_limit;
      }
    };
  }

  void start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      self->touch();
      self->watch();
      self->read_header();
    });
  }

 private:
  // --- connection --------------------------------------------------------------------------

  void touch() { last_progress_ = clock::now(); }

  // One timer per connection, armed every few seconds, instead of one per I/O operation.
  void watch() {
    watchdog_.expires_after(watchdog_period);
    watchdog_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || !self->socket_.is_open()) return;
      if (!self->executing_ && clock::now() - self->last_progress_ > stall_timeout) {
        beast::error_code ignored;
        self->socket_.close(ignored);
        return;
      }
      self->watch();
    });
  }

  void read_header() {
    parser_.emplace();
    parser_->header_limit(header_limit);
    // The body limit is generous: the protocol's own limits (JSON header, JSON tensors, raw
    // input, decompressed size) are checked with their exact messages after the read. What a
    // body costs is charged to the server's budget as its bytes arrive.
    parser_->body_limit(s_.max_body_size());
    chunks_ = 0;
    chunk_overflow_ = false;
    budget_refused_ = false;
    parser_->on_chunk_header(chunk_cb_);
    bhttp::async_read_header(socket_, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, std::size_t) {
                               self->touch();
                               self->on_header(ec);
                             });
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    auto& req = parser_->get();
    auto expect = req[bhttp::field::expect];
    if (!parser_->is_done() && iso_lower(expect) == "100-continue") {
      continue_ = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      net::async_write(socket_, net::buffer(*continue_),
                       [self = shared_from_this()](beast::error_code e, std::size_t) {
                         if (e) return self->close();
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  void read_body() {
    if (parser_->is_done()) return on_read({});
    auto length = parser_->content_length();
    if (length && *length > s_.max_body_size()) return on_read_error(bhttp::error::body_limit);
    if (!parser_->chunked() && length && *length >= direct_body_threshold && !metrics_)
      return read_body_directly(*length);
    // Small bodies: what a body may hold is charged up front (at most the threshold); chunked
    // bodies are charged chunk by chunk in chunk_cb_.
    if (length && !body_charge_.add(*length)) return refuse_budget();
    bhttp::async_read(socket_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        self->touch();
                        self->on_read(ec);
                      });
  }

  // Large bodies: the bytes already buffered, then reads straight into a buffer that grows as
  // bytes arrive (large recv calls, no parser copies, no zero-fill).
  void read_body_directly(std::uint64_t length) {
    direct_ = parser_->release();
    direct_body_ = std::make_shared<body_buffer>(static_cast<std::size_t>(length), s_.body_budget);
    while (buffer_.size() > 0 && !direct_body_->complete()) {
      if (direct_body_->full() && !direct_body_->grow()) return refuse_budget();
      const std::size_t n = net::buffer_copy(direct_body_->free_space(), buffer_.data());
      buffer_.consume(n);
      direct_body_->commit(n);
    }
    read_more_directly();
  }

  void read_more_directly() {
    body_buffer& b = *direct_body_;
    if (b.empty_capacity() && !b.complete()) {
      // Nothing is allocated for a body before its first bytes arrive.
      socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
        if (ec) return self->close();
        if (!self->direct_body_->grow()) return self->refuse_budget();
        self->read_more_directly();
      });
      return;
    }
    if (b.complete()) {
      keep_alive_ = direct_.keep_alive();
      ++s_.in_flight;
      counted_ = true;
      return dispatch(std::move(direct_), std::move(direct_body_));
    }
    if (b.full() && !b.grow()) return refuse_budget();
    socket_.async_read_some(b.free_space(), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      self->touch();
      if (ec) return self->close();
      self->direct_body_->commit(n);
      self->read_more_directly();
    });
  }

  // The in-flight budget is exhausted (or the system has no memory for the body): the client
  // is told so and the connection closed, since the rest of its body is not read.
  void refuse_budget() {
    direct_body_.reset();
    body_charge_.reset();
    unread_body_ = true;
    auto r = error_reply(413, "Request body too large: the server's in-flight request memory (" +
                                  std::to_string(s_.body_budget.limit()) +
                                  " bytes, --http-max-inflight-bytes) is exhausted; retry later");
    r.close = true;
    write(std::move(r));
  }

  // Every exception out of a request's handling (an allocation failure, above all) becomes an
  // error reply for that request; the connection and the server go on.
  template <class... Args>
  void dispatch(request_t&& req, Args&&... args) {
    try {
      handle(std::move(req), std::forward<Args>(args)...);
    } catch (const std::bad_alloc&) {
      executing_ = false;
      write(error_reply(500, "failed to allocate memory for the request"));
    } catch (const std::exception& e) {
      executing_ = false;
      write(error_reply(500, quote_input(e.what())));
    }
  }

  void on_read_error(beast::error_code ec) {
    if (budget_refused_) return refuse_budget();
    if (chunk_overflow_ || ec == bhttp::error::body_limit) unread_body_ = true;
    if (chunk_overflow_) {
      auto r = error_reply(400,
                           "Chunked request body exceeds maximum of 65536 non-empty chunks. Send "
                           "fewer or larger HTTP chunks.");
      r.close = true;
      return write(std::move(r));
    }
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
        ec == beast::error::timeout || ec == bhttp::error::partial_message ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted)
      return close();
    reply r;
    if (ec == bhttp::error::header_limit) {
      r = error_reply(431, "Request header fields too large");
    } else if (ec == bhttp::error::body_limit) {
      r = error_reply(413, "Request body too large");
    } else if (ec == bhttp::error::bad_content_length) {
      r = error_reply(400, "Unable to parse Content-Length");
    } else {
      r = error_reply(400, "Bad Request");
    }
    r.close = true;
    write(std::move(r));
  }

  void on_read(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    keep_alive_ = parser_->get().keep_alive();
    ++s_.in_flight;
    counted_ = true;
    auto req = parser_->release();
    head_request_ = req.method() == bhttp::verb::head;
    if (metrics_) return write(handle_metrics(req));
    dispatch(std::move(req));
  }

  void write(reply r) {
    reply_ = std::move(r);
    const bool keep = keep_alive_ && !reply_.close && !s_.exiting;
    std::size_t length = reply_.body.size();
    for (const auto& b : reply_.extra) length += b.size();
    head_.clear();
    head_.append("HTTP/1.1 ").append(std::to_string(reply_.status)).append(" ");
    head_.append(bhttp::obsolete_reason(static_cast<bhttp::status>(reply_.status))).append("\r\n");
    if (!reply_.content_type.empty())
      head_.append("Content-Type: ").append(reply_.content_type).append("\r\n");
    for (const auto& [k, v] : reply_.fields) head_.append(k).append(": ").append(v).append("\r\n");
    if (!keep) head_.append("Connection: close\r\n");
    head_.append("Content-Length: ").append(std::to_string(length)).append("\r\n\r\n");
    buffers_.clear();
    buffers_.push_back(net::buffer(head_));
    // A reply to HEAD has the headers GET would have, and never a body (RFC 9110 §9.3.2).
    if (!head_request_) {
      if (!reply_.body.empty()) buffers_.push_back(net::buffer(reply_.body));
      buffers_.insert(buffers_.end(), reply_.extra.begin(), reply_.extra.end());
    }
    net::async_write(socket_, buffers_, transfer_all_unbounded, [self = shared_from_this(), keep](beast::error_code ec, std::size_t) {
      self->touch();
      self->finish(!ec && keep);
    });
  }

  void finish(bool keep) {
    reply_ = {};
    head_request_ = false;
    body_charge_.reset();
    if (counted_) {
      --s_.in_flight;
      counted_ = false;
    }
    if (!keep) return unread_body_ ? linger() : close();
    read_header();
  }

  // The client may still be sending the body we refused: closing with its bytes unread would
  // reset the connection and could destroy the reply before the client reads it. Stop
  // sending, discard what still comes for a short while, then close.
  void linger() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (!linger_buffer_) linger_buffer_ = std::make_unique<std::array<char, 16384>>();
    linger_deadline_ = clock::now() + std::chrono::seconds(2);
    drain();
  }
  void drain() {
    if (clock::now() > linger_deadline_) return close();
    socket_.async_read_some(net::buffer(*linger_buffer_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }

  void close() {
    if (counted_) {
      --s_.in_flight;
      counted_ = false;
    }
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    socket_.close(ec);
    watchdog_.cancel();
  }

  // --- metrics port --------------------------------------------------------------------------

  reply handle_metrics(const request_t& req) {
    std::string_view path = inferwire::http::target_path(req.target());
    if (req.method() != bhttp::verb::get) return error_reply(405, "Method Not Allowed");
    reply r;
    if (path == "/metrics" || path == "/metrics/") {
      r.content_type = "text/plain; charset=utf-8";
      r.body = s_.metrics_text();
    }
    return r;
  }

  // --- v2 endpoints --------------------------------------------------------------------------

  void handle(request_t&& req, std::shared_ptr<body_buffer> big = {}) {
    const auto route = inferwire::http::match_route(req.target());
    if (big && route.kind != endpoint::model_infer) {
      // Only infer reads its body in place; the other endpoints take it as a string.
      req.body().assign(big->view());
      big.reset();
    }
    if (s_.log.verbose >= 1)
      s_.log.log_verbose(1, "HTTP request: " + std::string(req.method_string()) + " " +
                                std::string(req.target()));
    const auto method = req.method();
    head_request_ = method == bhttp::verb::head;
    const bool get = method == bhttp::verb::get;
    const bool post = method == bhttp::verb::post;
    auto not_allowed = [] { return error_reply(405, "Method Not Allowed"); };
    switch (route.kind) {
      case endpoint::health_live:
        if (!get) return write(not_allowed());
        if (auto st = svc_.live()) return write(error_reply(st));
        return write(empty_reply(200));
      case endpoint::health_ready:
        if (!get) return write(not_allowed());
        return write(empty_reply(svc_.ready() ? 200 : 400));
      case endpoint::server_metadata:
        if (!get) return write(not_allowed());
        return write(json_reply(s_.metadata_json));
      case endpoint::model_metadata:
        if (!get) return write(not_allowed());
        return write(model_metadata(route));
      case endpoint::model_ready: {
        if (!get) return write(not_allowed());
        bool ready = false;
        if (auto st = svc_.model_ready(route.model, route.version, ready)) return write(error_reply(st));
        // Upstream's HTTP frontend answers a model that is not ready with 400 and this text
        // (gRPC answers ready = false).
        if (!ready) return write(error_reply(400, "Model version not ready"));
        return write(empty_reply(200));
      }
      case endpoint::model_config:
        if (!get) return write(not_allowed());
        return write(model_config_reply(route));
      case endpoint::model_stats:
      case endpoint::all_stats:
        if (!get) return write(not_allowed());
        return write(statistics(route));
      case endpoint::model_trace:
      case endpoint::trace:
        if (!get && !post) return write(not_allowed());
        return write(trace(route, req));
      case endpoint::logging:
        if (!get && !post) return write(not_allowed());
        return write(logging(req));
      case endpoint::model_infer:
        if (!post) return write(not_allowed());
        return infer(route, std::move(req), std::move(big));
      case endpoint::repository_index:
        if (!post) return write(not_allowed());
        return repository_index(req);
      case endpoint::repository_load:
      case endpoint::repository_unload:
        if (!post) return write(not_allowed());
        return repository_control(route, std::move(req));
      case endpoint::system_shm:
      case endpoint::cuda_shm:
        if (route.action == "status" ? !get : !post) return write(not_allowed());
        return write(shared_memory(route, req.body()));
      case endpoint::model_generate:
      case endpoint::model_generate_stream:
        return write(error_reply(501, "this endpoint is not implemented by inferwire-server yet"));
      case endpoint::not_found:
        break;
    }
    write(error_reply(404, "Not Found"));
  }

  reply model_metadata(const inferwire::http::route& r) {
    v2::model_metadata md;
    if (auto st = svc_.model_metadata(r.model, r.version, md)) return error_reply(st);
    return json_reply(boost::json::serialize(boost::json::value_from(md)));
  }

  reply model_config_reply(const inferwire::http::route& r) {
    std::shared_ptr<const model_config> c;
    if (auto st = svc_.model_configuration(r.model, r.version, c)) return error_reply(st);
    return json_reply(c->json);
  }

  reply statistics(const inferwire::http::route& r) {
    v2::statistics_response out;
    if (auto st = svc_.statistics(r.kind == endpoint::all_stats ? std::string_view() : r.model, r.version, out))
      return error_reply(st);
    return json_reply(boost::json::serialize(boost::json::value_from(out)));
  }

  template <class T>
  status parse_body_as(std::string_view body, T& out, std::size_t max_depth = v2::max_json_depth) {
    status st;
    boost::json::value jv = v2::parse_json(body, st, max_depth);
    if (st) return st;
    try {
      out = boost::json::value_to<T>(jv);
    } catch (const inferwire::error& e) {
      return e.get_status();
    } catch (const std::exception& e) {
      return {errc::invalid_arg, e.what()};
    }
    return {};
  }

  // --- shared memory (v2-protocol §5) ----------------------------------------------------------

  reply shared_memory(const inferwire::http::route& r, std::string_view body) {
    const bool system = r.kind == endpoint::system_shm;
    const auto kind = system ? region_kind::system : region_kind::cuda;
    if (r.action == "status") {
      boost::json::array out;
      status st;
      if (system) {
        std::vector<v2::system_shm_status> v;
        st = svc_.system_shm_status(r.region, v);
        for (const auto& x : v) out.push_back(boost::json::value_from(x));
      } else {
        std::vector<v2::cuda_shm_status> v;
        st = svc_.cuda_shm_status(r.region, v);
        for (const auto& x : v) out.push_back(boost::json::value_from(x));
      }
      if (st) return error_reply(st);
      return json_reply(boost::json::serialize(out));
    }
    if (r.action == "unregister") {
      if (auto st = svc_.unregister_shm(kind, r.region)) return error_reply(st);
      return empty_reply(200);
    }
    // Register. Upstream's HTTP frontend checks the permission, then the region name of the
    // URL, before it parses the body; the name check and its text are HTTP's alone.
    if (auto st = s_.shm.check_allowed()) return error_reply(st);
    if (auto st = shm_registry::require_name(kind, r.region)) return error_reply(st);
    status st;
    if (system) {
      v2::system_shm_register_request q;
      if (auto e = parse_body_as(body, q)) return error_reply(e);
      q.name = r.region;
      st = svc_.register_system_shm(q);
    } else {
      v2::cuda_shm_register_request q;
      if (auto e = parse_body_as(body, q)) return error_reply(e);
      q.name = r.region;
      st = svc_.register_cuda_shm(q);
    }
    if (st) return error_reply(st);
    return empty_reply(200);
  }

  reply trace(const inferwire::http::route& r, const request_t& req) {
    std::string_view model;
    if (r.kind == endpoint::model_trace) {
      if (!r.version.empty()) return error_reply(404, "Not Found");
      model = r.model;
    }
    v2::trace_settings result;
    std::optional<v2::trace_settings> update;
    if (req.method() != bhttp::verb::get)
      if (auto st = parse_body_as(req.body(), update.emplace())) return error_reply(st);
    if (auto st = svc_.trace_settings(model, update ? &*update : nullptr, result)) return error_reply(st);
    return json_reply(boost::json::serialize(boost::json::value_from(result)));
  }

  reply logging(const request_t& req) {
    std::optional<v2::log_settings> update;
    if (req.method() == bhttp::verb::post)
      if (auto st = parse_body_as(req.body(), update.emplace())) return error_reply(st);
    v2::log_settings current;
    if (auto st = svc_.log_settings(update ? &*update : nullptr, current)) return error_reply(st);
    return json_reply(boost::json::serialize(boost::json::value_from(current)));
  }

  // --- model repository ----------------------------------------------------------------------

  void repository_index(const request_t& req) {
    v2::repository_index_request q;
    // The infer body's nesting limit is not the index body's: as upstream, a deeply nested
    // 'ready' is an invalid value, not a nesting error.
    if (!req.body().empty())
      if (auto st = parse_body_as(req.body(), q, control_json_depth)) return write(error_reply(st));
    std::vector<v2::repository_index_entry> index;
    // Upstream's HTTP frontend ignores the repository name of the index URL (gRPC refuses one).
    if (auto st = svc_.repository_index("", q.ready.value_or(false), index))
      return write(error_reply(st));
    boost::json::array out;
    for (const auto& e : index) out.push_back(boost::json::value_from(e));
    write(json_reply(boost::json::serialize(out)));
  }

  // Load and unload run on the execution pool: they are synchronous for the client (the reply
  // comes when they finished) but never hold an I/O thread.
  void repository_control(const inferwire::http::route& r, request_t&& req) {
    if (auto st = svc_.repository_available(r.repository)) return write(error_reply(st));
    const v2::codec_limits limits{static_cast<std::size_t>(s_.opts.http_max_input_size)};
    if (auto st = v2::check_json_size(req.body().size(), limits)) return write(error_reply(st));
    auto shared = std::make_shared<request_t>(std::move(req));
    const bool load = r.kind == endpoint::repository_load;
    executing_ = true;
    net::post(s_.execution, [self = shared_from_this(), shared, load, model = std::string(r.model),
                             repository = std::string(r.repository)] {
      status st;
      const std::string& body = shared->body();
      if (load) {
        v2::repository_load_request q;
        if (!body.empty()) st = self->parse_body_as(body, q);
        if (!st) st = self->svc_.repository_load(repository, model, q);
      } else {
        // As upstream: a malformed unload_dependents is ignored (unload without dependents).
        v2::repository_unload_request q;
        if (!body.empty()) {
          boost::json::value jv = v2::parse_json(body, st);
          if (!st) {
            try {
              q = boost::json::value_to<v2::repository_unload_request>(jv);
            } catch (const std::exception&) {
              q = {};
            }
          }
        }
        if (!st) st = self->svc_.repository_unload(repository, model, q.unload_dependents);
      }
      reply rep = st ? error_reply(st) : empty_reply(200);
      net::post(self->socket_.get_executor(), [self, rep = std::move(rep)]() mutable {
        self->executing_ = false;
        self->write(std::move(rep));
      });
    });
  }

  // --- infer ---------------------------------------------------------------------------------

  void infer(const inferwire::http::route& r, request_t&& req,
             std::shared_ptr<body_buffer> big) {
    auto job = std::make_shared<infer_job>();
    if (auto st = svc_.find_model(r.model, r.version, *job)) return write(error_reply(st));
    const model_config& c = *job->model->config;
    // Upstream's HTTP frontend refuses decoupled models with this text (gRPC's ModelInfer has
    // its own; ModelStreamInfer serves them).
    if (c.decoupled)
      return write(error_reply(
          501, "HTTP end point doesn't support models with decoupled transaction policy"));
    job->req = std::move(req);
    job->big_body = std::move(big);
    auto fail = [&](status e) { write(error_reply(svc_.failed(*job, std::move(e)))); };

    // Step 2: Content-Encoding.
    std::string_view body = job->big_body ? job->big_body->view() : std::string_view(job->req.body());
    const auto coding =
        inferwire::http::parse_content_encoding(job->req[bhttp::field::content_encoding]);
    if (!coding) {
      auto rep = error_reply(501, "Unsupported compression type");
      rep.fields.emplace_back("Accept-Encoding", "gzip, deflate");
      return write(std::move(rep));
    }
    const v2::codec_limits limits{static_cast<std::size_t>(s_.opts.http_max_input_size)};
    if (*coding != inferwire::http::content_coding::identity) {
      if (auto e = inferwire::http::decompress(body, limits.max_input_size, job->inflated))
        return fail(e);
      body = job->inflated;
    }
    // Steps 3 and 4: lengths.
    status st;
    std::size_t content_length = body.size();
    if (*coding == inferwire::http::content_coding::identity) {
      if (auto it = job->req.find(bhttp::field::content_length); it != job->req.end()) {
        content_length = v2::parse_content_length(it->value(), st);
        if (st) return fail(st);
        content_length = std::min(content_length, body.size());
      }
    }
    std::optional<std::string_view> ihcl;
    if (auto it = job->req.find(v2::header_length_field); it != job->req.end()) ihcl = it->value();
    const std::size_t header_length = v2::parse_header_length(ihcl, content_length, st);
    if (st) return fail(st);
    // Steps 5-9.
    job->request = v2::decode_infer_request(body.substr(0, content_length), header_length,
                                            c.name, st, limits);
    if (st) return fail(st);
    if (job->request.raw_binary) {
      std::vector<v2::tensor_metadata> inputs;
      for (const auto& t : c.inputs) inputs.push_back({t.name, t.datatype, t.dims});
      if (auto e = v2::deduce_raw_input(job->request, c.name, inputs, c.batching(), limits))
        return fail(e);
    }
    // Steps 10 and 11, then the run: inline for small requests (done is called before infer
    // returns, on this I/O thread), otherwise on the execution pool.
    if (auto e = svc_.admit(*job)) return write(error_reply(e));
    executing_ = true;
    svc_.infer(job, {}, [self = shared_from_this(), job, accept = std::string(job->req[bhttp::field::accept_encoding])](
                            status done) {
      reply rep = self->respond(*job, done, accept);
      rep.owner = job;
      net::dispatch(self->socket_.get_executor(), [self, rep = std::move(rep)]() mutable {
        self->executing_ = false;
        self->write(std::move(rep));
      });
    });
  }

  // The reply of a finished inference, where nothing may escape: a failure is its reply.
  reply respond(infer_job& job, const status& done, const std::string& accept) noexcept {
    try {
      if (done) return error_reply(done);
      return encode(job, accept);
    } catch (const std::bad_alloc&) {
      return error_reply(500, "failed to allocate memory for the request");
    } catch (const std::exception& e) {
      return error_reply(500, quote_input(e.what()));
    }
  }

  // The HTTP form of a response: each output in binary or JSON as the request's binary_data
  // parameters ask (outputs in shared memory stay there), then Accept-Encoding.
  reply encode(infer_job& job, const std::string& accept) {
    for (auto& o : job.response.outputs)
      if (o.encoding != v2::tensor_encoding::shared_memory) o.encoding = v2::output_encoding(job.request, o.name);
    if (auto st = v2::encode_infer_response(job.response, job.encoded)) return error_reply(st);
    reply rep;
    const bool binary = job.encoded.has_binary_data();
    rep.content_type = binary ? "application/octet-stream" : "application/json";
    if (binary)
      rep.fields.emplace_back(std::string(v2::header_length_field),
                              std::to_string(job.encoded.header_length()));
    const auto coding = inferwire::http::negotiate_accept_encoding(accept);
    if (coding != inferwire::http::content_coding::identity) {
      std::vector<std::string_view> parts;
      parts.push_back(job.encoded.header);
      for (auto seg : job.encoded.segments)
        parts.emplace_back(reinterpret_cast<const char*>(seg.data()), seg.size());
      if (inferwire::http::compress(parts, coding, rep.body)) {
        rep.fields.emplace_back("Content-Encoding", std::string(inferwire::http::coding_name(coding)));
        return rep;
      }
    }
    rep.body = std::move(job.encoded.header);
    for (auto seg : job.encoded.segments) rep.extra.push_back(net::buffer(seg.data(), seg.size()));
    return rep;
  }

  tcp::socket socket_;
  net::steady_timer watchdog_;
  clock::time_point last_progress_;
  bool executing_ = false;
  beast::flat_buffer buffer_;
  request_t direct_;
  std::shared_ptr<body_buffer> direct_body_;
  std::string head_;
  server_state& s_;
  service svc_;
  bool metrics_;
  std::optional<bhttp::request_parser<growing_body>> parser_;
  std::function<void(std::uint64_t, std::string_view, beast::error_code&)> chunk_cb_;
  std::size_t chunks_ = 0;
  bool chunk_overflow_ = false;
  bool budget_refused_ = false;
  bool unread_body_ = false;  ///< a refused body's bytes may still be arriving
  std::unique_ptr<std::array<char, 16384>> linger_buffer_;
  clock::time_point linger_deadline_;
  byte_budget::charge body_charge_{s_.body_budget};  ///< the parser-read body of this request
  bool keep_alive_ = true;
  bool head_request_ = false;  ///< the request being answered is a HEAD
  bool counted_ = false;
  std::shared_ptr<std::string> continue_;
  reply reply_;
  std::vector<net::const_buffer> buffers_;
};

// --- listener ------------------------------------------------------------------------------

class listener : public std::enable_shared_from_this<listener> {
 public:
  listener(server_state& s, bool metrics)
      : s_(s), acceptor_(*s.ios.front()), backoff_(*s.ios.front()), metrics_(metrics) {}

  status open(const std::string& address, int port, int& bound) {
    beast::error_code ec;
    auto addr = net::ip::make_address(address, ec);
    if (ec) return {errc::invalid_arg, "invalid address '" + address + "'"};
    tcp::endpoint ep(addr, static_cast<unsigned short>(port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec)
      return {errc::unavailable, "failed to listen on " + address + ":" + std::to_string(port) +
                                     ": " + ec.message()};
    bound = acceptor_.local_endpoint().port();
    return {};
  }

  void accept() {
    acceptor_.async_accept(s_.next_io(),
                           [self = shared_from_this()](beast::error_code ec, tcp::socket sock) {
                             if (ec == net::error::operation_aborted || !self->acceptor_.is_open())
                               return;
                             if (!ec) {
                               sock.set_option(tcp::no_delay(true), ec);
                               std::make_shared<session>(std::move(sock), self->s_, self->metrics_)
                                   ->start();
                             } else if (ec.category() == boost::system::system_category() &&
                                        is_resource_exhaustion(ec.value())) {
                               // Out of descriptors or memory: the pending connection stays in
                               // the backlog; try again shortly instead of spinning on it.
                               return self->accept_later();
                             }
                             self->accept();
                           });
  }

  void accept_later() {
    backoff_.expires_after(std::chrono::milliseconds(100));
    backoff_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && self->acceptor_.is_open()) self->accept();
    });
  }

  void stop() {
    net::post(acceptor_.get_executor(), [self = shared_from_this()] {
      beast::error_code ec;
      self->acceptor_.close(ec);
      self->backoff_.cancel();
    });
  }

 private:
  server_state& s_;
  tcp::acceptor acceptor_;
  net::steady_timer backoff_;
  bool metrics_;
};

std::shared_ptr<listener> start_listener(server_state& s, const std::string& address, int port,
                                         bool metrics, status& st, int& bound_port) {
  auto l = std::make_shared<listener>(s, metrics);
  if ((st = l->open(address, port, bound_port))) return nullptr;
  l->accept();
  return l;
}

void stop_listener(listener& l) { l.stop(); }

}  // namespace inferwire::server
