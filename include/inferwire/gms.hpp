// SPDX-License-Identifier: Apache-2.0
// inferwire/gms.hpp — the GPU Memory Service: messages and codec, framing, lock state machine, layout hash, server template, the backend and mapper concepts, backends, session, memory manager and mappers (component gms).
#ifndef INFERWIRE_GMS_HPP
#define INFERWIRE_GMS_HPP

#include <inferwire/gms/error.hpp>
#include <inferwire/gms/backend.hpp>
#include <inferwire/gms/messages.hpp>
#include <inferwire/gms/codec.hpp>
#include <inferwire/gms/framing.hpp>
#include <inferwire/gms/lock_fsm.hpp>
#include <inferwire/gms/layout_hash.hpp>
#include <inferwire/gms/server.hpp>
#include <inferwire/gms/memfd_backend.hpp>
#include <inferwire/gms/cuda_vmm_backend.hpp>
#include <inferwire/gms/cuda_vmm_mapper.hpp>
#include <inferwire/gms/session.hpp>
#include <inferwire/gms/memory_manager.hpp>
#include <inferwire/gms/mmap_mapper.hpp>

#endif
