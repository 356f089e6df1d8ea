#include <inferwire/v2/json.hpp>

#include <catch2/catch.hpp>
