// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/impl/server.hpp — bodies of gms/server.hpp (a template: included by it).
#ifndef INFERWIRE_GMS_IMPL_SERVER_HPP
#define INFERWIRE_GMS_IMPL_SERVER_HPP

namespace inferwire::gms {

template <backend Backend>
void server<Backend>::start() {
  namespace fs = std::filesystem;
  const fs::path path(opts_.socket_path);
  if (opts_.socket_path.empty()) throw std::invalid_argument("GMS server: no socket path");
  boost::system::error_code ec;
  struct stat existing {};
  if (::lstat(opts_.socket_path.c_str(), &existing) == 0 && existing.st_uid != ::geteuid())
    throw std::runtime_error("GMS socket path " + opts_.socket_path +
                             " belongs to another user; refusing to use or replace it");
  if (fs::exists(fs::symlink_status(path))) {
    protocol::socket probe(ioc_);
    probe.connect(protocol::endpoint(opts_.socket_path), ec);
    if (!ec) throw std::runtime_error("GMS already running at " + opts_.socket_path);
    fs::remove(path);  // a stale socket file
  }
  // The socket is bound under a temporary name, made private and listening, and only then
  // renamed to its path: a client that waits for the path to appear never finds a socket that
  // refuses its connection (or one that others may open).
  const std::string temporary = opts_.socket_path + "." + std::to_string(::getpid()) + ".tmp";
  const bool via_temporary = temporary.size() < sizeof(sockaddr_un{}.sun_path);
  const std::string& bound = via_temporary ? temporary : opts_.socket_path;
  if (via_temporary) ::unlink(temporary.c_str());
  acceptor_.open(protocol());
  acceptor_.bind(protocol::endpoint(bound));
  ::chmod(bound.c_str(), 0600);
  acceptor_.listen();
  if (via_temporary && ::rename(temporary.c_str(), opts_.socket_path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temporary.c_str());
    acceptor_.close(ec);
    throw std::system_error(err, std::generic_category(), "GMS server: publishing " + opts_.socket_path);
  }
  pending_fd_limit_ = opts_.max_total_pending_fds;
  if (pending_fd_limit_ == 0) {
    rlimit rl{};
    pending_fd_limit_ = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                            ? std::max<std::size_t>(16, static_cast<std::size_t>(rl.rlim_cur) / 4)
                            : 4096;
  }
  started_ = true;
  log("Server started: " + opts_.socket_path);
  accept();
}

template <backend Backend>
void server<Backend>::stop() {
  if (!started_) return;
  started_ = false;
  boost::system::error_code ec;
  acceptor_.close(ec);
  accept_backoff_.cancel();
  for (auto& w : waiters_) {
    if (w->counted_writer) fsm_.end_rw_wait();
    w->counted_writer = false;
  }
  waiters_.clear();
  for (auto& c : connections_) {
    c->timer.cancel();
    c->socket.close(ec);
  }
  connections_.clear();
  for (auto& [id, a] : allocations_) backend_.release(a.handle);
  allocations_.clear();
  metadata_.clear();
  std::filesystem::remove(opts_.socket_path, ec);
  log("Server stopped");
}

template <backend Backend>
void server<Backend>::accept() {
  auto c = std::make_shared<connection>(ioc_, opts_.max_frame_size);
  acceptor_.async_accept(c->socket, [this, c](boost::system::error_code ec) {
    if (!started_) return;
    if (ec && is_resource_exhaustion(ec.value())) return accept_later();
    if (!ec && connections_.size() >= opts_.max_connections) {
      log("refused a connection: " + std::to_string(connections_.size()) + " connections open");
      boost::system::error_code ignored;
      c->socket.close(ignored);
    } else if (!ec) {
      c->id = ++next_session_;
      boost::system::error_code ignored;
      c->socket.non_blocking(true, ignored);
      connections_.push_back(c);
      log("session_" + std::to_string(c->id) + " connected", true);
      // A client that never completes its first frame holds nothing for long.
      c->timer.expires_after(opts_.first_frame_timeout);
      c->timer.async_wait([this, c](boost::system::error_code e) {
        if (!e && c->state == phase::first && !c->close_after_write) drop(c, "no first frame in time");
      });
      read(c);
    }
    accept();
  });
}

// Out of descriptors (or memory): the connection waits in the backlog while the loop pauses,
// instead of failing the same accept in a busy loop.
template <backend Backend>
void server<Backend>::accept_later() {
  accept_backoff_.expires_after(std::chrono::milliseconds(100));
  accept_backoff_.async_wait([this](boost::system::error_code ec) {
    if (!ec && started_) accept();
  });
}

template <backend Backend>
void server<Backend>::read(const connection_ptr& c) {
  // Frames already buffered come first (pipelining), one request at a time.
  std::string payload;
  auto paused = [&c] {
    return c->state == phase::closing || c->state == phase::waiting || c->busy ||
           c->close_after_write;
  };
  while (!paused()) {
    auto r = c->reader.next(payload);
    if (r == frame_reader::result::too_large) return drop(c, "frame too large", true);
    if (r == frame_reader::result::need_more) break;
    on_frame(c, payload);
  }
  if (paused() || c->reading) return;
  c->reading = true;
  // Wait for readability, then read into the server's one buffer: an idle connection holds no
  // read buffer of its own. (Descriptors a client sends are discarded by the kernel: there is
  // no room for them.)
  c->socket.async_wait(protocol::socket::wait_read, [this, c](boost::system::error_code ec) {
    c->reading = false;
    if (!started_ || c->state == phase::closing) return;
    if (ec) return drop(c, ec.message());
    const ssize_t n = ::recv(c->socket.native_handle(), read_buffer_.data(), read_buffer_.size(),
                             MSG_DONTWAIT);
    if (n == 0) return drop(c, "EOF");
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return read(c);
      return drop(c, std::strerror(errno));
    }
    c->reader.append(read_buffer_.data(), static_cast<std::size_t>(n));
    read(c);
  });
}

// Whatever a request makes fail (a backend error, an allocation failure) is that client's
// problem: it gets an error reply and loses its connection; the server and the layout go on.
template <backend Backend>
void server<Backend>::on_frame(const connection_ptr& c, const std::string& payload) {
  try {
    serve_frame(c, payload);
  } catch (const std::exception& e) {
    log("Request of session session_" + std::to_string(c->id) + " failed: " + e.what());
    c->busy = false;
    if (c->state != phase::closing) {
      c->close_after_write = true;
      reply(c, error_response{std::string("Request failed: ") + e.what(), 0});
    }
  }
}

template <backend Backend>
void server<Backend>::serve_frame(const connection_ptr& c, const std::string& payload) {
  message m;
  std::string error;
  if (!try_decode(payload, m, error)) {
    // No reply: a decode failure drops the connection (in a session it aborts an RW lock).
    if (c->state == phase::first) log("Handshake recv error: " + error);
    else log("Recv error on session session_" + std::to_string(c->id) + ": " + error);
    return drop(c, "decode error");
  }
  if (c->state == phase::first) return on_first(c, std::move(m));
  on_request(c, std::move(m));
}

template <backend Backend>
void server<Backend>::on_first(const connection_ptr& c, message&& m) {
  if (std::holds_alternative<get_runtime_state_request>(m)) {
    get_runtime_state_response r;
    r.state = state_name();
    r.has_rw_session = fsm_.has_rw_session();
    r.ro_session_count = static_cast<std::int64_t>(fsm_.ro_session_count());
    r.waiting_writers = fsm_.waiting_writers();
    r.committed = fsm_.committed();
    r.is_ready = fsm_.is_ready();
    r.allocation_count = static_cast<std::int64_t>(allocations_.size());
    r.memory_layout_hash = hash_;
    c->close_after_write = true;
    return reply(c, r);
  }
  if (std::holds_alternative<get_event_history_request>(m)) {
    get_event_history_response r;
    r.events.assign(events_.begin(), events_.end());
    c->close_after_write = true;
    return reply(c, r);
  }
  c->timer.cancel();  // the first frame came
  if (const auto* h = std::get_if<handshake_request>(&m)) return start_handshake(c, *h);
  c->close_after_write = true;
  reply(c, error_response{"Expected HandshakeRequest", 0});
}

template <backend Backend>
void server<Backend>::start_handshake(const connection_ptr& c, const handshake_request& q) {
  c->requested = q.lock_type;
  const grant g = fsm_.decide(q.lock_type, q.timeout_ms);
  if (g != grant::wait) return finish_wait(c, g);
  c->state = phase::waiting;
  if (q.lock_type == requested_lock_type::rw) {
    fsm_.begin_rw_wait();
    c->counted_writer = true;
  }
  waiters_.push_back(c);
  if (q.timeout_ms) {
    // Clamped to a year: larger values would overflow the clock's arithmetic.
    constexpr std::int64_t year_ms = std::int64_t{365} * 24 * 3600 * 1000;
    c->timer.expires_after(std::chrono::milliseconds(std::min(*q.timeout_ms, year_ms)));
    c->timer.async_wait([this, c](boost::system::error_code ec) {
      if (ec || c->state != phase::waiting) return;
      waiters_.remove(c);
      finish_wait(c, grant::fail);
    });
  }
  watch_waiter(c);
}

// A waiting client that hangs up is dropped without being granted (upstream would grant it
// and, for RW, clear the committed layout; gms-protocol §12.1 #4).
template <backend Backend>
void server<Backend>::watch_waiter(const connection_ptr& c) {
  c->socket.async_wait(protocol::socket::wait_read, [this, c](boost::system::error_code ec) {
    if (ec || c->state != phase::waiting) return;
    if (peer_gone(c->socket.native_handle())) {
      waiters_.remove(c);
      return drop(c, "waiting client hung up");
    }
    // Data pipelined behind the handshake waits in the socket; check again a bit later.
    auto t = std::make_shared<boost::asio::steady_timer>(ioc_, std::chrono::milliseconds(50));
    t->async_wait([this, c, t](boost::system::error_code) {
      if (c->state == phase::waiting) watch_waiter(c);
    });
  });
}

template <backend Backend>
void server<Backend>::finish_wait(const connection_ptr& c, grant g) {
  if (c->counted_writer) {
    fsm_.end_rw_wait();
    c->counted_writer = false;
  }
  c->timer.cancel();
  handshake_response r;
  if (g == grant::fail) {
    r.success = false;
    r.committed = fsm_.committed();
    c->state = phase::session;  // so that the close below is not an abort
    c->close_after_write = true;
    reply(c, r);
    process_waiters();  // a writer stopped waiting: readers may go now
    return;
  }
  if (g == grant::rw) {
    const bool had_layout = fsm_.rw_connect(c->id);
    const std::size_t n = allocations_.size();
    clear_layout();
    if (had_layout) record("allocations_cleared", static_cast<std::int64_t>(n));
    record("rw_connected");
    c->granted = granted_lock_type::rw;
  } else {
    fsm_.ro_connect(c->id);
    c->granted = granted_lock_type::ro;
  }
  c->state = phase::session;
  r.success = true;
  r.committed = fsm_.committed();
  r.granted_lock_type = c->granted;
  log("session_" + std::to_string(c->id) + " granted " + std::string(to_string(*c->granted)), true);
  reply(c, r);
  process_waiters();
  read(c);
}

template <backend Backend>
void server<Backend>::process_waiters() {
  for (bool progress = true; progress;) {
    progress = false;
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      auto c = *it;
      // (A waiting writer's own grant depends on can_rw only, not on the waiting count.)
      const grant g = fsm_.retry(c->requested);
      if (g == grant::wait) continue;
      waiters_.erase(it);
      finish_wait(c, g);
      progress = true;
      break;
    }
  }
}

template <backend Backend>
void server<Backend>::on_request(const connection_ptr& c, message&& m) {
  const bool rw = c->granted == granted_lock_type::rw;
  const std::string_view name = class_name(m);
  const bool read_only_ok =
      std::holds_alternative<export_allocation_request>(m) ||
      std::holds_alternative<get_allocation_request>(m) ||
      std::holds_alternative<list_allocations_request>(m) ||
      std::holds_alternative<metadata_get_request>(m) ||
      std::holds_alternative<metadata_list_request>(m) ||
      std::holds_alternative<get_lock_state_request>(m) ||
      std::holds_alternative<get_allocation_state_request>(m) ||
      std::holds_alternative<get_state_hash_request>(m);
  const bool writer_ok =
      std::holds_alternative<allocate_request>(m) ||
      std::holds_alternative<free_allocation_request>(m) ||
      std::holds_alternative<metadata_put_request>(m) ||
      std::holds_alternative<metadata_delete_request>(m) ||
      std::holds_alternative<commit_request>(m);
  if (!(read_only_ok || (rw && writer_ok))) {
    std::string why = std::string(name) + " not allowed for " + (rw ? "RW" : "RO") +
                      " session in state " + state_name();
    log("Rejected " + std::string(name) + " from session session_" + std::to_string(c->id) +
        ": " + why);
    return reply(c, error_response{why, 0});
  }
  auto unknown = [&](const std::string& id) { reply(c, error_response{"Unknown allocation: " + id, 0}); };

  if (auto* q = std::get_if<allocate_request>(&m)) {
    if (q->size <= 0)
      return reply(c, error_response{"size must be > 0, got " + std::to_string(q->size), 0});
    // Not in upstream (whose integers are unbounded): sizes whose rounding would overflow.
    if (q->size > std::numeric_limits<std::int64_t>::max() -
                      static_cast<std::int64_t>(backend_.granularity()))
      return reply(c, error_response{"size too large, got " + std::to_string(q->size), 0});
    c->busy = true;
    return do_allocate(c, std::move(*q), clock::now(), false);
  }
  if (auto* q = std::get_if<export_allocation_request>(&m)) {
    auto it = allocations_.find(q->allocation_id);
    if (it == allocations_.end()) return unknown(q->allocation_id);
    // Each descriptor waits in the server until the client reads its reply: a client that
    // stops reading may hold only a few, and all clients together a share of the limit.
    if (c->out_fds >= opts_.max_pending_fds || pending_fds_ >= pending_fd_limit_)
      return drop(c, "too many exported descriptors not read by the client", true);
    export_allocation_response r;
    static_cast<allocation_info&>(r) = it->second.info;
    std::string frame = encode_frame(r);
    int fd = -1;
    try {
      if (send_lent(c, frame, it->second.handle)) return;
      fd = export_descriptor(c, it->second.handle);
    } catch (const std::exception& e) {
      log("Export of " + q->allocation_id + " failed: " + e.what());
      return reply(c, error_response{std::string("Export failed: ") + e.what(), 0});
    }
    return send(c, std::move(frame), fd);
  }
  if (auto* q = std::get_if<get_allocation_request>(&m)) {
    auto it = allocations_.find(q->allocation_id);
    if (it == allocations_.end()) return unknown(q->allocation_id);
    get_allocation_response r;
    static_cast<allocation_info&>(r) = it->second.info;
    return reply(c, r);
  }
  if (auto* q = std::get_if<list_allocations_request>(&m)) {
    list_allocations_response r;
    for (const auto& [id, a] : allocations_)
      if (!q->tag || a.info.tag == *q->tag) {
        get_allocation_response e;
        static_cast<allocation_info&>(e) = a.info;
        r.allocations.push_back(std::move(e));
      }
    std::sort(r.allocations.begin(), r.allocations.end(),
              [](const auto& a, const auto& b) { return a.layout_slot < b.layout_slot; });
    return reply(c, r);
  }
  if (auto* q = std::get_if<free_allocation_request>(&m)) {
    auto it = allocations_.find(q->allocation_id);
    if (it == allocations_.end()) return reply(c, free_allocation_response{false});
    backend_.release(it->second.handle);
    allocations_.erase(it);
    std::erase_if(metadata_, [&](const auto& kv) { return kv.second.allocation_id == q->allocation_id; });
    return reply(c, free_allocation_response{true});
  }
  if (auto* q = std::get_if<metadata_put_request>(&m)) {
    auto it = allocations_.find(q->allocation_id);
    if (it == allocations_.end()) return unknown(q->allocation_id);
    if (q->offset_bytes < 0)
      return reply(c, error_response{"offset_bytes must be >= 0, got " + std::to_string(q->offset_bytes), 0});
    if (q->offset_bytes >= it->second.info.aligned_size)
      return reply(c, error_response{"offset_bytes " + std::to_string(q->offset_bytes) +
                                         " out of range for allocation " + q->allocation_id +
                                         " (aligned_size=" + std::to_string(it->second.info.aligned_size) + ")",
                                     0});
    metadata_[q->key] = {q->allocation_id, q->offset_bytes, std::move(q->value.data)};
    return reply(c, metadata_put_response{true});
  }
  if (auto* q = std::get_if<metadata_get_request>(&m)) {
    metadata_get_response r;
    if (auto it = metadata_.find(q->key); it != metadata_.end()) {
      r.found = true;
      r.allocation_id = it->second.allocation_id;
      r.offset_bytes = it->second.offset_bytes;
      r.value = bytes{it->second.value};
    }
    return reply(c, r);
  }
  if (auto* q = std::get_if<metadata_delete_request>(&m))
    return reply(c, metadata_delete_response{metadata_.erase(q->key) > 0});
  if (auto* q = std::get_if<metadata_list_request>(&m)) {
    metadata_list_response r;
    for (const auto& [k, v] : metadata_)
      if (k.starts_with(q->prefix)) r.keys.push_back(k);
    return reply(c, r);
  }
  if (std::holds_alternative<get_lock_state_request>(m)) {
    return reply(c, get_lock_state_response{state_name(), fsm_.has_rw_session(),
                                            static_cast<std::int64_t>(fsm_.ro_session_count()),
                                            fsm_.waiting_writers(), fsm_.committed(),
                                            fsm_.is_ready()});
  }
  if (std::holds_alternative<get_allocation_state_request>(m))
    return reply(c, get_allocation_state_response{static_cast<std::int64_t>(allocations_.size())});
  if (std::holds_alternative<get_state_hash_request>(m))
    return reply(c, get_state_hash_response{hash_});
  if (std::holds_alternative<commit_request>(m)) {
    // Committed memory is read-only for good where the backend can make it so (memfd: a reader
    // could otherwise reopen its descriptor read-write). A seal that fails fails the commit.
    if constexpr (sealing_backend<Backend>) {
      try {
        for (const auto& [id, a] : allocations_) backend_.seal_for_readers(a.handle);
      } catch (const std::exception& e) {
        log(std::string("Commit refused: the allocations could not be sealed against writes: ") + e.what());
        return reply(c, commit_response{false});
      }
    }
    std::vector<layout_allocation> la;
    for (const auto& [id, a] : allocations_)
      la.push_back({a.info.layout_slot, a.info.size, a.info.aligned_size, a.info.tag});
    std::vector<layout_metadata> lm;
    for (const auto& [k, v] : metadata_) {
      auto it = allocations_.find(v.allocation_id);
      if (it == allocations_.end() || v.offset_bytes >= it->second.info.aligned_size)
        throw std::logic_error("GMS metadata integrity failure at commit: " + k);
      lm.push_back({k, it->second.info.layout_slot, v.offset_bytes, v.value});
    }
    hash_ = layout_hash(std::move(la), std::move(lm));
    fsm_.rw_commit(c->id);
    c->granted.reset();
    record("committed");
    log("Committed layout with state hash: " + hash_.substr(0, 16) + "...");
    c->close_after_write = true;
    reply(c, commit_response{true});
    process_waiters();
    return;
  }
}

// Readers get read-only descriptors where the backend can make them.
template <backend Backend>
int server<Backend>::export_descriptor(const connection_ptr& c, const typename Backend::handle& h) {
  if constexpr (read_only_exporting_backend<Backend>) {
    if (c->granted != granted_lock_type::rw) return backend_.export_read_only_fd(h);
  }
  return backend_.export_fd(h);
}

// An export whose reply can go out now carries the backend's own descriptor (the kernel takes
// a reference as the first byte is sent): no copy to make and close. One that must wait behind
// other output gets a copy of its own (export_descriptor), which stays valid if the allocation
// is freed meanwhile.
template <backend Backend>
bool server<Backend>::send_lent(const connection_ptr& c, const std::string& frame, const typename Backend::handle& h) {
  if constexpr (lending_backend<Backend>) {
    if (c->state == phase::closing || c->writing || !c->out.empty()) return false;
    int fd = -1;
    if constexpr (read_only_exporting_backend<Backend>) {
      if (c->granted != granted_lock_type::rw) fd = backend_.lent_read_only_fd(h);
    }
    if (fd < 0) fd = backend_.lent_fd(h);
    const ssize_t n = send_with_fd(c->socket.native_handle(), frame, fd);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      drop(c, "send failed");
      return true;
    }
    if (static_cast<std::size_t>(n) < frame.size()) {  // the rest waits, without a descriptor
      c->out_bytes += frame.size() - static_cast<std::size_t>(n);
      c->out.push_back({frame, -1, static_cast<std::size_t>(n)});
      flush(c);
    }
    return true;
  } else {
    (void)c, (void)frame, (void)h;
    return false;
  }
}

template <backend Backend>
void server<Backend>::do_allocate(const connection_ptr& c, allocate_request q,
                                  clock::time_point started, bool oom_recorded) {
  if (c->state == phase::closing) return;
  if (peer_gone(c->socket.native_handle())) return drop(c, "client gone during allocation");
  const auto g = static_cast<std::int64_t>(backend_.granularity());
  const std::int64_t aligned = (q.size + g - 1) / g * g;
  typename Backend::handle h;
  alloc_status got = alloc_status::ok;
  try {
    got = backend_.allocate(static_cast<std::size_t>(aligned), h);
  } catch (const std::exception& e) {  // out of descriptors, a driver error: not retried
    c->busy = false;
    log("allocation of aligned_size=" + std::to_string(aligned) + " failed: " + e.what());
    reply(c, error_response{"Allocation failed: requested_size=" + std::to_string(q.size) +
                                ", aligned_size=" + std::to_string(aligned) + ", tag=" + q.tag +
                                ": " + e.what(),
                            0});
    return read(c);
  }
  if (got == alloc_status::out_of_memory) {
    if (!oom_recorded) record("allocation_oom", static_cast<std::int64_t>(allocations_.size()));
    const double waited = std::chrono::duration<double>(clock::now() - started).count();
    if (opts_.alloc_retry_timeout && waited >= *opts_.alloc_retry_timeout) {
      c->busy = false;
      char text[64];
      std::snprintf(text, sizeof text, "%.3f", waited);  // as Dynamo writes it
      reply(c, error_response{"Timed out waiting for GPU memory: requested_size=" +
                                  std::to_string(q.size) + ", aligned_size=" + std::to_string(aligned) +
                                  ", tag=" + q.tag + ", waited_sec=" + text,
                              0});
      return read(c);
    }
    log("allocation OOM for aligned_size=" + std::to_string(aligned) + " retrying in " +
        std::to_string(opts_.alloc_retry_interval) + "s");
    c->timer.expires_after(std::chrono::duration_cast<clock::duration>(
        std::chrono::duration<double>(opts_.alloc_retry_interval)));
    c->timer.async_wait([this, c, q = std::move(q), started](boost::system::error_code ec) mutable {
      if (ec) return;
      do_allocate(c, std::move(q), started, true);
    });
    return;
  }
  allocation a;
  a.info.allocation_id = boost::uuids::to_string(uuids_());
  a.info.size = q.size;
  a.info.aligned_size = aligned;
  a.info.tag = q.tag;
  a.info.layout_slot = next_slot_++;
  a.handle = h;
  allocate_response r{a.info.allocation_id, a.info.size, a.info.aligned_size, a.info.layout_slot};
  allocations_.emplace(a.info.allocation_id, std::move(a));
  c->busy = false;
  reply(c, r);
  read(c);
}

template <backend Backend>
void server<Backend>::send(const connection_ptr& c, std::string frame, int fd) {
  if (c->state == phase::closing) {
    if (fd >= 0) ::close(fd);
    return;
  }
  c->out_bytes += frame.size();
  if (fd >= 0) {
    ++c->out_fds;
    ++pending_fds_;
  }
  c->out.push_back({std::move(frame), fd, 0});
  if (c->out_bytes > opts_.max_pending_output) return drop(c, "client does not read its replies", true);
  flush(c);
}

template <backend Backend>
void server<Backend>::flush(const connection_ptr& c) {
  if (c->writing || c->state == phase::closing) return;
  // Send as much as the socket takes now (the socket is non-blocking); wait for writability
  // only when it is full.
  const int s = c->socket.native_handle();
  while (!c->out.empty()) {
    outgoing& o = c->out.front();
    std::string_view rest = std::string_view(o.frame).substr(o.sent);
    ssize_t n;
    if (o.fd >= 0 && o.sent == 0) n = send_with_fd(s, rest, o.fd);
    else n = ::send(s, rest.data(), rest.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return drop(c, "send failed");
    }
    if (o.fd >= 0) {  // the descriptor went with the first byte
      ::close(o.fd);
      o.fd = -1;
      --c->out_fds;
      --pending_fds_;
    }
    o.sent += static_cast<std::size_t>(n);
    c->out_bytes -= static_cast<std::size_t>(n);
    if (o.sent == o.frame.size()) c->out.pop_front();
  }
  if (!c->out.empty()) {
    c->writing = true;
    c->socket.async_wait(protocol::socket::wait_write, [this, c](boost::system::error_code ec) {
      c->writing = false;
      if (ec || !started_) return;
      flush(c);
    });
    return;
  }
  if (c->close_after_write) {
    // Commit, probes, failed handshakes: the server closes the connection.
    boost::system::error_code ignored;
    c->socket.shutdown(protocol::socket::shutdown_both, ignored);
    drop(c, "closed by server");
  }
}

template <backend Backend>
void server<Backend>::drop(const connection_ptr& c, const std::string& why, bool limit) {
  if (c->state == phase::closing) return;
  const bool was_waiting = c->state == phase::waiting;
  c->state = phase::closing;
  log("session_" + std::to_string(c->id) + " closed: " + why, !limit);
  c->timer.cancel();
  if (was_waiting) {
    waiters_.remove(c);
    if (c->counted_writer) {
      fsm_.end_rw_wait();
      c->counted_writer = false;
    }
  }
  if (fsm_.rw_session() == c->id) {
    fsm_.rw_abort(c->id);
    const std::size_t n = allocations_.size();
    log("RW aborted; clearing active layout");
    clear_layout();
    record("rw_aborted");
    record("allocations_cleared", static_cast<std::int64_t>(n));
  } else if (fsm_.holds(c->id)) {
    fsm_.ro_disconnect(c->id);
  }
  boost::system::error_code ec;
  c->socket.close(ec);
  for (auto& o : c->out)  // descriptors never sent go now, not when the last handler lets go
    if (o.fd >= 0) {
      ::close(o.fd);
      o.fd = -1;
    }
  pending_fds_ -= c->out_fds;
  c->out_fds = 0;
  connections_.remove(c);
  process_waiters();
}

template <backend Backend>
void server<Backend>::clear_layout() {
  const std::size_t n = allocations_.size();
  for (auto& [id, a] : allocations_) backend_.release(a.handle);
  allocations_.clear();
  metadata_.clear();
  hash_.clear();
  next_slot_ = 0;
  if (n) log("Cleared " + std::to_string(n) + " allocations");
}

}  // namespace inferwire::gms

#endif
