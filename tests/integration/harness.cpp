// SPDX-License-Identifier: Apache-2.0
#include "harness.hpp"

#include <inferwire/v2/binary.hpp>

#include <boost/beast/http/parser.hpp>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace iwtest {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t spawn(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<std::string> copy = args;
  copy.insert(copy.begin(), binary);
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, binary.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + binary);
  return pid;
}

std::string temp_log_path() {
  static int n = 0;
  return "/tmp/inferwire-it-" + std::to_string(getpid()) + "-" + std::to_string(n++) + ".log";
}

/// The server's arguments: the repositories, the test defaults `extra` does not set, `extra`.
std::vector<std::string> server_args(const std::vector<std::string>& extra, bool default_repos) {
  std::vector<std::string> args;
  if (default_repos) {
    args = {"--model-repository", bundled_models(), "--model-repository", source_path("tests/integration/models")};
  }
  // Defaults, unless `extra` sets the same flag.
  const std::pair<const char*, const char*> defaults[] = {
      {"--http-address", "127.0.0.1"}, {"--http-port", "0"}, {"--metrics-port", "0"},
      {"--allow-grpc", "false"}, {"--http-thread-count", "2"},
      // No machine-wide CUDA VMM socket for test servers (tests that want one name their own).
      {"--cuda-vmm-socket", ""}};
  for (const auto& [flag, value] : defaults) {
    bool overridden = false;
    for (const auto& e : extra) overridden |= e == flag || e.rfind(std::string(flag) + "=", 0) == 0;
    if (overridden) continue;
    args.emplace_back(flag);
    args.emplace_back(value);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

child_process::child_process(const std::string& binary, const std::vector<std::string>& args)
    : log_path_(temp_log_path()) {
  pid_ = spawn(binary, args, log_path_);
}

child_process::~child_process() {
  if (pid_ > 0) stop();
  std::remove(log_path_.c_str());
}

int child_process::stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 3000; ++i) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return -1;
}

bool child_process::exited() {
  int status = 0;
  if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) pid_ = -1;
  return pid_ <= 0;
}

std::string child_process::log() const { return read_file(log_path_); }

server_process::server_process(std::vector<std::string> extra, bool default_repos)
    : process_(INFERWIRE_SERVER_PATH, server_args(extra, default_repos)) {
  const std::regex http_re("Started HTTPService at [0-9.]+:([0-9]+)");
  const std::regex metrics_re("Started Metrics Service at [0-9.]+:([0-9]+)");
  const std::regex grpc_re("Started GRPCInferenceService at [0-9.]+:([0-9]+)");
  bool want_grpc = false;
  for (std::size_t i = 0; i < extra.size(); ++i)
    want_grpc |= extra[i] == "--allow-grpc=true" ||
                 (extra[i] == "--allow-grpc" && i + 1 < extra.size() && extra[i + 1] == "true");
  for (int i = 0; i < 1000; ++i) {
    std::string text = log();
    std::smatch m;
    if (std::regex_search(text, m, http_re)) http_port_ = std::stoi(m[1]);
    if (std::regex_search(text, m, metrics_re)) metrics_port_ = std::stoi(m[1]);
    if (std::regex_search(text, m, grpc_re)) grpc_port_ = std::stoi(m[1]);
    if (http_port_ && metrics_port_ && (grpc_port_ || !want_grpc)) return;
    if (process_.exited()) throw std::runtime_error("inferwire-server exited during startup:\n" + text);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw std::runtime_error("inferwire-server did not start:\n" + log());
}

server_process& shared_server() {
  static server_process s;
  return s;
}

int run_server_once(const std::vector<std::string>& args, std::string& output) {
  std::string path = temp_log_path();
  pid_t pid = spawn(INFERWIRE_SERVER_PATH, args, path);
  int status = 0;
  waitpid(pid, &status, 0);
  output = read_file(path);
  std::remove(path.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// --- connections ---------------------------------------------------------------------------

connection::connection(int port) : socket_(io_) {
  socket_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  socket_.set_option(tcp::no_delay(true));
}

void connection::send(std::string_view bytes) { net::write(socket_, net::buffer(bytes)); }

std::optional<reply> connection::read() {
  bhttp::response_parser<bhttp::string_body> p;
  p.body_limit(std::uint64_t{1} << 32);
  p.header_limit(1 << 20);
  boost::system::error_code ec;
  bhttp::read(socket_, buffer_, p, ec);
  if (ec) return std::nullopt;
  reply r;
  auto& res = p.get();
  r.status = res.result_int();
  for (const auto& f : res) {
    std::string name(f.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = std::string(f.value());
  }
  r.keep_alive = res.keep_alive();
  r.body = std::move(res.body());
  return r;
}

bool connection::closed_by_server(std::chrono::milliseconds wait) {
  if (buffer_.size() != 0) return false;
  pollfd pfd{socket_.native_handle(), POLLIN, 0};
  if (::poll(&pfd, 1, static_cast<int>(wait.count())) <= 0) return false;
  char c;
  ssize_t n = ::recv(socket_.native_handle(), &c, 1, MSG_PEEK);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

bool connection::readable_now() {
  if (buffer_.size() != 0) return true;
  pollfd pfd{socket_.native_handle(), POLLIN, 0};
  return ::poll(&pfd, 1, 0) > 0;
}

std::string request_text(std::string_view method, std::string_view target, std::string_view body,
                         const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string s;
  s.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  bool has_length = false;
  for (const auto& [k, v] : headers) {
    s.append(k).append(": ").append(v).append("\r\n");
    if (k == "Content-Length" || k == "Transfer-Encoding") has_length = true;
  }
  if (!has_length && (!body.empty() || method == "POST"))
    s.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  s.append("\r\n").append(body);
  return s;
}

reply request(int port, std::string_view method, std::string_view target, std::string_view body,
              const std::vector<std::pair<std::string, std::string>>& headers) {
  connection c(port);
  c.send(request_text(method, target, body, headers));
  auto r = c.read();
  if (!r) throw std::runtime_error("no reply to " + std::string(method) + " " + std::string(target));
  return *r;
}

std::string error_of(const reply& r) { return inferwire::v2::parse_error_body(r.body); }

test_certificate::test_certificate() {
  static int n = 0;
  dir = (std::filesystem::temp_directory_path() /
         ("inferwire-tls-" + std::to_string(::getpid()) + "-" + std::to_string(n++)))
            .string();
  std::filesystem::create_directories(dir);
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                          "-addext subjectAltName=DNS:localhost -keyout " +
                          key() + " -out " + cert() + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("openssl req failed");
}

test_certificate::~test_certificate() { std::filesystem::remove_all(dir); }

std::string file_text(const std::string& path) { return read_file(path); }

std::string source_path(std::string_view relative) {
  return std::string(INFERWIRE_SOURCE_DIR) + "/" + std::string(relative);
}

std::string bundled_models() { return source_path("reference_server/models"); }

std::vector<std::string> open_fds_of(pid_t pid) {
  std::vector<std::string> targets;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::error_code link_ec;
    auto target = std::filesystem::read_symlink(it->path(), link_ec);
    targets.push_back(link_ec ? std::string("?") : target.string());
  }
  std::sort(targets.begin(), targets.end());
  return targets;
}

std::vector<std::string> added_fds(const std::vector<std::string>& before, const std::vector<std::string>& after) {
  std::vector<std::string> added;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(added));
  return added;
}

bool is_simple_metadata(const inferwire::v2::model_metadata& m) {
  const inferwire::shape_t shape{-1, 16};
  auto io_ok = [&](const std::vector<inferwire::v2::tensor_metadata>& v, const char* prefix) {
    return v.size() == 2 && v[0].name == std::string(prefix) + "0" && v[1].name == std::string(prefix) + "1" &&
           v[0].datatype == inferwire::data_type::int32 && v[0].shape == shape && v[1].shape == shape;
  };
  return m.name == "simple" && m.versions == std::vector<std::string>{"1"} && io_ok(m.inputs, "INPUT") &&
         io_ok(m.outputs, "OUTPUT");
}

std::uint64_t failure_metric(const server_process& s, const std::string& model, const std::string& reason) {
  const std::string text = request(s.metrics_port(), "GET", "/metrics").body;
  const std::string series =
      "nv_inference_request_failure{model=\"" + model + "\",reason=\"" + reason + "\",version=\"1\"} ";
  const auto at = text.find(series);
  return at == std::string::npos ? ~std::uint64_t{0} : std::stoull(text.substr(at + series.size()));
}

}  // namespace iwtest
