// SPDX-License-Identifier: Apache-2.0
// libtritonserver.so, part 3: the functions of the API inferwire-server does not offer (yet).
// Each answers TRITONSERVER_ERROR_UNSUPPORTED naming itself, so that every backend library links
// and loads, and one that calls such a function gets a clear error instead of a missing symbol.
// docs/backends.md has the table, with why for each group:
//  - TRITONSERVER_ServerOptions*, TRITONSERVER_ServerNew/Delete/Stop/SetExitTimeout, repository
//    registration and polling, TRITONSERVER_ServerMetrics, TRITONSERVER_Metrics*: embedding a
//    server in another program; inferwire-server is the program;
//  - TRITONBACKEND_State*: implicit sequence state;
//  - TRITONBACKEND_ModelInstanceResponseStatistics*: per-response statistics of decoupled models.
#include "host.hpp"

#define IW_REFUSE(name, params) \
  TRITONSERVER_Error* name params { \
    return inferwire::triton_host::make_error(TRITONSERVER_ERROR_UNSUPPORTED, #name " is not supported by inferwire-server"); \
  }

extern "C" {

// clang-format off
IW_REFUSE(TRITONSERVER_MetricsDelete, (TRITONSERVER_Metrics*))
IW_REFUSE(TRITONSERVER_MetricsFormatted, (TRITONSERVER_Metrics*, TRITONSERVER_MetricFormat, const char**, size_t*))
IW_REFUSE(TRITONSERVER_ServerOptionsNew, (TRITONSERVER_ServerOptions**))
IW_REFUSE(TRITONSERVER_ServerOptionsDelete, (TRITONSERVER_ServerOptions*))
IW_REFUSE(TRITONSERVER_ServerOptionsSetServerId, (TRITONSERVER_ServerOptions*, const char*))
IW_REFUSE(TRITONSERVER_ServerOptionsSetModelRepositoryPath, (TRITONSERVER_ServerOptions*, const char*))
IW_REFUSE(TRITONSERVER_ServerOptionsSetModelControlMode, (TRITONSERVER_ServerOptions*, TRITONSERVER_ModelControlMode))
IW_REFUSE(TRITONSERVER_ServerOptionsSetStartupModel, (TRITONSERVER_ServerOptions*, const char*))
IW_REFUSE(TRITONSERVER_ServerOptionsSetStrictModelConfig, (TRITONSERVER_ServerOptions*, bool))
IW_REFUSE(TRITONSERVER_ServerOptionsSetModelConfigName, (TRITONSERVER_ServerOptions*, const char*))
IW_REFUSE(TRITONSERVER_ServerOptionsSetRateLimiterMode, (TRITONSERVER_ServerOptions*, TRITONSERVER_RateLimitMode))
IW_REFUSE(TRITONSERVER_ServerOptionsAddRateLimiterResource, (TRITONSERVER_ServerOptions*, const char*, const size_t, const int))
IW_REFUSE(TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize, (TRITONSERVER_ServerOptions*, uint64_t))
IW_REFUSE(TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize, (TRITONSERVER_ServerOptions*, int, uint64_t))
IW_REFUSE(TRITONSERVER_ServerOptionsSetCudaVirtualAddressSize, (TRITONSERVER_ServerOptions*, int, size_t))
IW_REFUSE(TRITONSERVER_ServerOptionsSetResponseCacheByteSize, (TRITONSERVER_ServerOptions*, uint64_t))
IW_REFUSE(TRITONSERVER_ServerOptionsSetCacheConfig, (TRITONSERVER_ServerOptions*, const char*, const char*))
IW_REFUSE(TRITONSERVER_ServerOptionsSetCacheDirectory, (TRITONSERVER_ServerOptions*, const char*))
IW_REFUSE(TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability, (TRITONSERVER_ServerOptions*, double))
IW_REFUSE(TRITONSERVER_ServerOptionsSetExitOnError, (TRITONSERVER_ServerOptions*, bool))
IW_REFUSE(TRITONSERVER_ServerOptionsSetStrictReadiness, (TRITONSERVER_ServerOptions*, bool))
IW_REFUSE(TRITONSERVER_ServerOptionsSetExitTimeout, (TRITONSERVER_ServerOptions*, unsigned int))
IW_REFUSE(TRITONSERVER_ServerOptionsSetBufferManagerThreadCount, (TRITONSERVER_ServerOptions*, unsigned int))
IW_REFUSE(TRITONSERVER_ServerOptionsSetModelLoadThreadCount, (TRITONSERVER_ServerOptions*, unsigned int))
IW_REFUSE(TRITONSERVER_ServerOptionsSetModelLoadRetryCount, (TRITONSERVER_ServerOptions*, unsigned int))
IW_REFUSE(TRITONSERVER_ServerOptionsSetModelNamespacing, (TRITONSERVER_ServerOptions*, bool))
IW_REFUSE(TRITONSERVER_ServerOptionsSetEnablePeerAccess, (TRITONSERVER_ServerOptions*, bool))
IW_REFUSE(TRITONSERVER_ServerOptionsSetLogFile, (TRITONSERVER_ServerOptions*, const char*))
IW_REFUSE(TRITONSERVER_ServerOptionsSetLogInfo, (TRITONSERVER_ServerOptions*, bool))
IW_REFUSE(TRITONSERVER_ServerOptionsSetLogWarn, (TRITONSERVER_ServerOptions*, bool))
IW_REFUSE(TRITONSERVER_ServerOptionsSetLogError, (TRITONSERVER_ServerOptions*, bool))
IW_REFUSE(TRITONSERVER_ServerOptionsSetLogFormat, (TRITONSERVER_ServerOptions*, const TRITONSERVER_LogFormat))
IW_REFUSE(TRITONSERVER_ServerOptionsSetLogVerbose, (TRITONSERVER_ServerOptions*, int))
IW_REFUSE(TRITONSERVER_ServerOptionsSetMetrics, (TRITONSERVER_ServerOptions*, bool))
IW_REFUSE(TRITONSERVER_ServerOptionsSetGpuMetrics, (TRITONSERVER_ServerOptions*, bool))
IW_REFUSE(TRITONSERVER_ServerOptionsSetCpuMetrics, (TRITONSERVER_ServerOptions*, bool))
IW_REFUSE(TRITONSERVER_ServerOptionsSetMetricsInterval, (TRITONSERVER_ServerOptions*, uint64_t))
IW_REFUSE(TRITONSERVER_ServerOptionsSetBackendDirectory, (TRITONSERVER_ServerOptions*, const char*))
IW_REFUSE(TRITONSERVER_ServerOptionsSetRepoAgentDirectory, (TRITONSERVER_ServerOptions*, const char*))
IW_REFUSE(TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit, (TRITONSERVER_ServerOptions*, const TRITONSERVER_InstanceGroupKind, const int, const double))
IW_REFUSE(TRITONSERVER_ServerOptionsSetBackendConfig, (TRITONSERVER_ServerOptions*, const char*, const char*, const char*))
IW_REFUSE(TRITONSERVER_ServerOptionsSetHostPolicy, (TRITONSERVER_ServerOptions*, const char*, const char*, const char*))
IW_REFUSE(TRITONSERVER_ServerOptionsSetMetricsConfig, (TRITONSERVER_ServerOptions*, const char*, const char*, const char*))
IW_REFUSE(TRITONSERVER_ServerNew, (TRITONSERVER_Server**, TRITONSERVER_ServerOptions*))
IW_REFUSE(TRITONSERVER_ServerDelete, (TRITONSERVER_Server*))
IW_REFUSE(TRITONSERVER_ServerStop, (TRITONSERVER_Server*))
IW_REFUSE(TRITONSERVER_ServerSetExitTimeout, (TRITONSERVER_Server*, unsigned int))
IW_REFUSE(TRITONSERVER_ServerRegisterModelRepository, (TRITONSERVER_Server*, const char*, const TRITONSERVER_Parameter**, const uint32_t))
IW_REFUSE(TRITONSERVER_ServerUnregisterModelRepository, (TRITONSERVER_Server*, const char*))
IW_REFUSE(TRITONSERVER_ServerPollModelRepository, (TRITONSERVER_Server*))
IW_REFUSE(TRITONSERVER_ServerMetrics, (TRITONSERVER_Server*, TRITONSERVER_Metrics**))
IW_REFUSE(TRITONBACKEND_StateNew, (TRITONBACKEND_State**, TRITONBACKEND_Request*, const char*, const TRITONSERVER_DataType, const int64_t*, const uint32_t))
IW_REFUSE(TRITONBACKEND_StateUpdate, (TRITONBACKEND_State*))
IW_REFUSE(TRITONBACKEND_StateBuffer, (TRITONBACKEND_State*, void**, const uint64_t, TRITONSERVER_MemoryType*, int64_t*))
IW_REFUSE(TRITONBACKEND_StateBufferAttributes, (TRITONBACKEND_State*, TRITONSERVER_BufferAttributes**))
IW_REFUSE(TRITONBACKEND_ModelInstanceResponseStatisticsNew, (TRITONBACKEND_ModelInstanceResponseStatistics**))
IW_REFUSE(TRITONBACKEND_ModelInstanceResponseStatisticsDelete, (TRITONBACKEND_ModelInstanceResponseStatistics*))
IW_REFUSE(TRITONBACKEND_ModelInstanceResponseStatisticsSetModelInstance, (TRITONBACKEND_ModelInstanceResponseStatistics*, TRITONBACKEND_ModelInstance*))
IW_REFUSE(TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseFactory, (TRITONBACKEND_ModelInstanceResponseStatistics*, TRITONBACKEND_ResponseFactory*))
IW_REFUSE(TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseStart, (TRITONBACKEND_ModelInstanceResponseStatistics*, uint64_t))
IW_REFUSE(TRITONBACKEND_ModelInstanceResponseStatisticsSetComputeOutputStart, (TRITONBACKEND_ModelInstanceResponseStatistics*, uint64_t))
IW_REFUSE(TRITONBACKEND_ModelInstanceResponseStatisticsSetResponseEnd, (TRITONBACKEND_ModelInstanceResponseStatistics*, uint64_t))
IW_REFUSE(TRITONBACKEND_ModelInstanceResponseStatisticsSetError, (TRITONBACKEND_ModelInstanceResponseStatistics*, TRITONSERVER_Error*))
IW_REFUSE(TRITONBACKEND_ModelInstanceReportResponseStatistics, (TRITONBACKEND_ModelInstanceResponseStatistics*))
// clang-format on

}  // extern "C"
