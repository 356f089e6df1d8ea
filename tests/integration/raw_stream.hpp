// SPDX-License-Identifier: Apache-2.0
// One ModelStreamInfer stream of raw messages, driven one operation at a time on a completion
// queue of its own: for the bytes the server writes, and for messages no client would send.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

namespace inferwire::test {

class raw_stream {
 public:
  /// Opens the stream; `opened()` says whether the server took it.
  explicit raw_stream(const std::shared_ptr<::grpc::Channel>& channel) : generic_(channel) {
    rw_ = generic_.PrepareCall(&ctx_, "/inference.GRPCInferenceService/ModelStreamInfer", &cq_);
    rw_->StartCall(nullptr);
    opened_ = step();
  }
  raw_stream(const raw_stream&) = delete;
  raw_stream& operator=(const raw_stream&) = delete;
  ~raw_stream() {
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  bool opened() const { return opened_; }
  /// Sends `bytes` as one message.
  bool write(const std::string& bytes) {
    ::grpc::Slice slice(bytes);
    ::grpc::ByteBuffer in(&slice, 1);
    rw_->Write(in, nullptr);
    return step();
  }
  /// The next message's bytes; false once the stream is over.
  bool read(std::string& bytes) {
    ::grpc::ByteBuffer out;
    rw_->Read(&out, nullptr);
    if (!step()) return false;
    std::vector<::grpc::Slice> slices;
    if (!out.Dump(&slices).ok()) return false;
    bytes.clear();
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    return true;
  }
  /// Closes the client's side.
  bool writes_done() {
    rw_->WritesDone(nullptr);
    return step();
  }
  /// The stream's status.
  ::grpc::Status finish() {
    ::grpc::Status st;
    rw_->Finish(&st, nullptr);
    if (!step()) return ::grpc::Status(::grpc::StatusCode::UNKNOWN, "the finish did not complete");
    return st;
  }

 private:
  bool step() {
    void* tag = nullptr;
    bool ok = false;
    return cq_.Next(&tag, &ok) && ok;
  }

  ::grpc::GenericStub generic_;
  ::grpc::CompletionQueue cq_;
  ::grpc::ClientContext ctx_;
  std::unique_ptr<::grpc::GenericClientAsyncReaderWriter> rw_;
  bool opened_ = false;
};

}  // namespace inferwire::test
