#include <inferwire/v2/binary.hpp>

#include <catch2/catch.hpp>
