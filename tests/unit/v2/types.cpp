#include <inferwire/v2/types.hpp>

#include <catch2/catch.hpp>
