// SPDX-License-Identifier: Apache-2.0
// Triton backend libraries in inferwire-server (docs/backends.md): finding a model's
// libtriton_<backend>.so as Triton does, loading it once per process, and the adapter that runs
// a model's batches through TRITONBACKEND_ModelInstanceExecute with the C API of
// reference_server/backend_host.
#pragma once

#include "logger.hpp"

#include <inferwire/core/error.hpp>
#include <inferwire/triton/backend_api.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace inferwire::server {

struct backend_library_settings {
  std::filesystem::path directory = "/opt/tritonserver/backends";
  /// --backend-config settings as (backend, (setting, value)); backend "" for global ones.
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> config;
  /// Whether a model whose folder came from a load request's `file:` parameters may run code
  /// that came with it (a backend library in its folder, a model.py).
  bool allow_model_file_code = false;
};

/// From now on make_backend() loads Triton backend libraries as `settings` say, and backend
/// log lines go to `log`, which must outlive every model.
void enable_backend_libraries(backend_library_settings settings, logger& log);

/// The API's error codes and the server's, both ways (one table: backends' errors reach clients,
/// the server's answers reach backends that call it).
errc errc_of(TRITONSERVER_Error_Code c) noexcept;
TRITONSERVER_Error_Code code_of(errc e) noexcept;

/// The backend configuration a library gets (TRITONBACKEND_BackendConfig) for `backend`:
/// {"cmdline": {...}} with Triton's defaults, the global settings and the backend's own.
std::string backend_config_json(const backend_library_settings& settings, const std::string& backend);

}  // namespace inferwire::server
