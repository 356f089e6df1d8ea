// SPDX-License-Identifier: Apache-2.0
// inferwire/grpc/impl/stream.hpp — bodies of grpc::stream (part of impl/client.hpp): a
// ModelStreamInfer call on gRPC's callback API, driven from the stream's asynchronous
// operations with no thread of its own.
//
// The reactor keeps two holds: the read flow's (released when a read comes back not ok, i.e.
// the stream has ended) and the write flow's (released after WritesDone, or when writing has
// become impossible). gRPC calls OnDone once both are gone and the status is in; the reactor
// keeps itself alive until then. Every decision is taken under `mu`; gRPC operations are
// started and handlers completed after it is released (a reaction may run inline, and a
// handler may start the next operation).
#ifndef INFERWIRE_GRPC_IMPL_STREAM_HPP
#define INFERWIRE_GRPC_IMPL_STREAM_HPP

namespace inferwire::grpc {
namespace detail {

struct stream_state final
    : ::grpc::ClientBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse> {
  using write_handler = net::any_completion_handler<void(error_code)>;
  using read_handler = net::any_completion_handler<void(error_code, infer_result)>;

  /// What to do once `mu` is released.
  struct actions {
    const pb::ModelInferRequest* write = nullptr;
    bool writes_done = false;
    bool remove_write_hold = false;
    bool read = false;
    bool remove_read_hold = false;
    std::vector<std::function<void(std::shared_ptr<void>)>> completions;
    /// A reference that travels with the last completion (to be released where it runs).
    std::shared_ptr<void> carry;
  };

  std::shared_ptr<client_state> client;
  ::grpc::ClientContext ctx;
  std::shared_ptr<stream_state> self;  // until OnDone

  std::mutex mu;
  // Writes, oldest first; the front one is in flight while write_active.
  std::deque<std::pair<std::shared_ptr<pb::ModelInferRequest>, write_handler>> writes;
  bool write_active = false;
  bool write_failed = false;
  bool writes_closed = false;  // no more writes accepted (writes done asked, or finishing)
  bool writes_done_started = false;
  bool write_hold = true;
  write_handler writes_done_handler;
  // Reads.
  pb::ModelStreamInferResponse incoming;
  read_handler reader;
  bool read_active = false;
  bool read_ended = false;
  bool read_hold = true;
  bool draining = false;  // finishing or abandoned: unread responses are discarded
  write_handler finisher;
  // The end.
  bool done = false;
  error_code final_status;

  template <class Handler, class... Args>
  void complete_later(actions& a, Handler& h, Args... args) {
    auto owned = std::make_shared<Handler>(std::move(h));
    auto fallback = client->executor();
    a.completions.emplace_back([owned, fallback, ... args = std::move(args)](std::shared_ptr<void> carry) mutable {
      complete_on_executor(std::move(*owned), fallback, std::move(carry), std::move(args)...);
    });
  }

  /// The next steps of both flows, under `mu`.
  void advance(actions& a) {
    const bool dead = read_ended || write_failed || done;
    if (!write_active) {
      if (!writes.empty() && !dead) {
        write_active = true;
        a.write = writes.front().first.get();
      } else {
        for (auto& w : writes) complete_later(a, w.second, error_code(client_errc::stream_closed));
        writes.clear();
        if ((writes_closed || dead) && write_hold) {
          write_hold = false;
          a.remove_write_hold = true;
          if (!dead) {
            writes_done_started = true;
            a.writes_done = true;
          }
        }
        if (writes_done_handler && !writes_done_started) complete_later(a, writes_done_handler, error_code{});
      }
    }
    if (!read_active && !read_ended && (reader || draining)) {
      read_active = true;
      a.read = true;
    }
    if (read_ended && read_hold) {
      read_hold = false;
      a.remove_read_hold = true;
    }
  }

  /// Carries out `a` with `mu` released.
  void apply(actions& a) {
    if (a.write) StartWrite(a.write);
    if (a.writes_done) StartWritesDone();
    if (a.read) StartRead(&incoming);
    if (a.remove_write_hold) RemoveHold();
    if (a.remove_read_hold) RemoveHold();
    for (std::size_t i = 0; i < a.completions.size(); ++i)
      a.completions[i](i + 1 == a.completions.size() ? std::move(a.carry) : nullptr);
  }

  template <class F>
  void step(F&& decide) {
    actions a;
    {
      std::lock_guard lock(mu);
      decide(a);
      advance(a);
    }
    apply(a);
  }

  // --- reactions

  void OnWriteDone(bool ok) override {
    reaction_scope reaction;
    step([&](actions& a) {
      write_active = false;
      if (!ok) write_failed = true;
      complete_later(a, writes.front().second, ok ? error_code{} : error_code(client_errc::stream_closed));
      writes.pop_front();
    });
  }

  void OnWritesDoneDone(bool ok) override {
    reaction_scope reaction;
    step([&](actions& a) {
      if (writes_done_handler)
        complete_later(a, writes_done_handler, ok ? error_code{} : error_code(client_errc::stream_closed));
    });
  }

  void OnReadDone(bool ok) override {
    reaction_scope reaction;
    step([&](actions& a) {
      read_active = false;
      if (!ok) {
        read_ended = true;  // the reader, if any, waits for the status (OnDone)
        return;
      }
      if (!reader) {  // draining
        incoming.Clear();
        return;
      }
      error_code ec;
      if (!incoming.error_message().empty())
        ec = make_error(static_cast<int>(::grpc::StatusCode::UNKNOWN), incoming.error_message());
      // With an error, the response the server sent along (its id names the failed request).
      auto r = result_access::make(std::shared_ptr<pb::ModelInferResponse>(incoming.release_infer_response()));
      incoming.Clear();
      complete_later(a, reader, ec, std::move(r));
    });
  }

  void OnDone(const ::grpc::Status& s) override {
    reaction_scope reaction;
    step([&](actions& a) {
      done = true;
      final_status = to_error(s);
      if (reader) complete_later(a, reader, final_status ? final_status : error_code(net::error::eof), infer_result{});
      if (writes_done_handler) complete_later(a, writes_done_handler, final_status);
      if (finisher) complete_later(a, finisher, final_status);
      // The reactor's own reference travels with the last completion, so that where the
      // handler runs on an application thread, so does the release (see impl/client.hpp).
      // Without completions it goes at the end of step(), after the last use of this object.
      a.carry = std::move(self);
    });
  }
};

/// `dst = std::move(src)` for handlers: Asio 1.81's any_completion_handler move assignment
/// recurses without end, so the handler is moved by construction and swapped in.
template <class Handler>
void store(Handler& dst, Handler& src) {
  Handler(std::move(src)).swap(dst);
}

template <class... Args>
struct blocking_wait {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  error_code ec;
  std::tuple<Args...> values;
};

/// A handler that completes inline (on whichever thread finishes the operation) and wakes the
/// thread blocked in a stream's blocking form.
template <class... Args>
struct blocking_handler {
  std::shared_ptr<blocking_wait<Args...>> wait;
  using executor_type = net::system_executor;
  executor_type get_executor() const noexcept { return {}; }
  void operator()(error_code ec, Args... args) {
    std::lock_guard lock(wait->mu);
    wait->ec = ec;
    wait->values = std::tuple<Args...>(std::move(args)...);
    wait->done = true;
    wait->cv.notify_all();
  }
};

template <class... Args, class Initiate>
std::tuple<Args...> wait_for(Initiate initiate, error_code& ec) {
  auto w = std::make_shared<blocking_wait<Args...>>();
  initiate(net::any_completion_handler<void(error_code, Args...)>(blocking_handler<Args...>{w}));
  std::unique_lock lock(w->mu);
  w->cv.wait(lock, [&] { return w->done; });
  ec = w->ec;
  return std::move(w->values);
}

}  // namespace detail

INFERWIRE_DECL stream client::open_stream(const call_options& o) {
  auto s = std::make_shared<detail::stream_state>();
  s->client = state_;
  detail::prepare_context(s->ctx, state_->options, o);
  s->self = s;
  state_->stub->async()->ModelStreamInfer(&s->ctx, s.get());
  s->AddMultipleHolds(2);
  s->StartCall();
  return stream(std::move(s));
}

INFERWIRE_DECL stream::~stream() {
  if (!state_) return;
  // Abandoned: end the call (pending handlers complete with CANCELLED) and let it run down.
  state_->ctx.TryCancel();
  state_->step([&](detail::stream_state::actions&) {
    state_->writes_closed = true;
    state_->draining = true;
  });
}

INFERWIRE_DECL stream::executor_type stream::get_executor() const noexcept { return state_->client->executor(); }

INFERWIRE_DECL void stream::cancel() { state_->ctx.TryCancel(); }

INFERWIRE_DECL stream::encoded stream::encode(model_id model, const v2::infer_request& request) {
  return std::make_shared<pb::ModelInferRequest>(detail::encode_request(model, request));
}

INFERWIRE_DECL void stream::initiate_write(std::shared_ptr<detail::stream_state> s, encoded m,
                                           net::any_completion_handler<void(error_code)> h) {
  s->step([&](detail::stream_state::actions& a) {
    if (s->writes_closed || s->done) {
      s->complete_later(a, h, error_code(client_errc::stream_closed));
      return;
    }
    s->writes.emplace_back(std::static_pointer_cast<pb::ModelInferRequest>(std::move(m)), std::move(h));
  });
}

INFERWIRE_DECL void stream::initiate_read(std::shared_ptr<detail::stream_state> s,
                                          net::any_completion_handler<void(error_code, infer_result)> h) {
  s->step([&](detail::stream_state::actions& a) {
    if (s->reader || s->finisher) {
      s->complete_later(a, h, error_code(client_errc::operation_in_progress), infer_result{});
    } else if (s->done) {
      s->complete_later(a, h, s->final_status ? s->final_status : error_code(net::error::eof), infer_result{});
    } else {
      detail::store(s->reader, h);
    }
  });
}

INFERWIRE_DECL void stream::initiate_writes_done(std::shared_ptr<detail::stream_state> s,
                                                 net::any_completion_handler<void(error_code)> h) {
  s->step([&](detail::stream_state::actions& a) {
    if (s->writes_done_handler || s->done || s->writes_closed) {
      s->complete_later(a, h, error_code{});  // already half-closed (or over)
      return;
    }
    s->writes_closed = true;
    detail::store(s->writes_done_handler, h);
  });
}

INFERWIRE_DECL void stream::initiate_finish(std::shared_ptr<detail::stream_state> s,
                                            net::any_completion_handler<void(error_code)> h) {
  s->step([&](detail::stream_state::actions& a) {
    if (s->reader || s->finisher) {
      s->complete_later(a, h, error_code(client_errc::operation_in_progress));
    } else if (s->done) {
      s->complete_later(a, h, s->final_status);
    } else {
      detail::store(s->finisher, h);
      s->writes_closed = true;
      s->draining = true;
    }
  });
}

INFERWIRE_DECL void stream::write(model_id model, const v2::infer_request& request, error_code& ec) {
  auto m = encode(model, request);
  detail::wait_for<>([&](auto h) { initiate_write(state_, std::move(m), std::move(h)); }, ec);
}
INFERWIRE_DECL void stream::write(model_id model, const v2::infer_request& request) {
  error_code ec;
  write(model, request, ec);
  throw_if(ec);
}
INFERWIRE_DECL infer_result stream::read(error_code& ec) {
  return std::get<0>(
      detail::wait_for<infer_result>([&](auto h) { initiate_read(state_, std::move(h)); }, ec));
}
INFERWIRE_DECL infer_result stream::read() {
  error_code ec;
  auto r = read(ec);
  throw_if(ec);
  return r;
}
INFERWIRE_DECL void stream::writes_done(error_code& ec) {
  detail::wait_for<>([&](auto h) { initiate_writes_done(state_, std::move(h)); }, ec);
}
INFERWIRE_DECL void stream::writes_done() {
  error_code ec;
  writes_done(ec);
  throw_if(ec);
}
INFERWIRE_DECL void stream::finish(error_code& ec) {
  detail::wait_for<>([&](auto h) { initiate_finish(state_, std::move(h)); }, ec);
}
INFERWIRE_DECL void stream::finish() {
  error_code ec;
  finish(ec);
  throw_if(ec);
}

}  // namespace inferwire::grpc

#endif
