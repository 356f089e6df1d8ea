// SPDX-License-Identifier: Apache-2.0
// A hostile GRPCInferenceService for the gRPC client's hostile table, in a process of its own
// (so that its memory is not the client's). Prints its port, then serves until killed. The
// model name picks the misbehaviour:
//   huge    ModelInfer answers with a 300 MiB output
//   stall   ModelInfer answers after 30 s
//   flood   ModelStreamInfer sends responses without end, never finishing
#include "grpc_service.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

namespace pb = inference;

namespace {

class hostile_service final : public pb::GRPCInferenceService::Service {
  grpc::Status ModelInfer(grpc::ServerContext* ctx, const pb::ModelInferRequest* req,
                          pb::ModelInferResponse* resp) override {
    if (req->model_name() == "huge") {
      auto* out = resp->add_outputs();
      out->set_name("OUTPUT0");
      out->set_datatype("UINT8");
      out->add_shape(300 << 20);
      resp->add_raw_output_contents()->assign(std::size_t{300} << 20, 'h');
      return grpc::Status::OK;
    }
    if (req->model_name() == "stall") {
      for (int i = 0; i < 300 && !ctx->IsCancelled(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return grpc::Status::OK;
    }
    return {grpc::StatusCode::NOT_FOUND, "no such hostility"};
  }
  grpc::Status ModelStreamInfer(grpc::ServerContext* ctx,
                                grpc::ServerReaderWriter<pb::ModelStreamInferResponse, pb::ModelInferRequest>* s) override {
    pb::ModelInferRequest req;
    if (!s->Read(&req)) return grpc::Status::OK;
    pb::ModelStreamInferResponse r;
    r.mutable_infer_response()->set_model_name(req.model_name());
    r.mutable_infer_response()->add_outputs()->set_name("OUTPUT0");
    while (!ctx->IsCancelled() && s->Write(r)) {
    }
    return grpc::Status::OK;
  }
};

}  // namespace

int main() {
  hostile_service service;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.SetMaxSendMessageSize(-1);
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  if (!server) return 1;
  std::printf("%d\n", port);
  std::fflush(stdout);
  server->Wait();
}
