#include <inferwire/core/error.hpp>

#include <catch2/catch.hpp>
