#include <inferwire/core/parameter.hpp>

#include <catch2/catch.hpp>
