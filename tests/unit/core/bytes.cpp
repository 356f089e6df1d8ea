#include <inferwire/core/bytes.hpp>

#include <catch2/catch.hpp>
