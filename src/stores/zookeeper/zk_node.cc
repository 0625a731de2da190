// stores/zookeeper/zk_node.cc — node names and node data.
#include "stores/zookeeper/zk_node.h"

#include <charconv>

namespace baton::store::zk {
namespace {

bool plain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

template <typename T>
bool parse_number(std::string_view s, T* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::string escape(std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size());
  for (unsigned char c : name) {
    if (plain(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::optional<std::string> unescape(std::string_view component) {
  std::string out;
  for (std::size_t i = 0; i < component.size(); ++i) {
    const char c = component[i];
    if (c != '%') {
      if (!plain(static_cast<unsigned char>(c))) return std::nullopt;
      out.push_back(c);
      continue;
    }
    if (i + 2 >= component.size()) return std::nullopt;
    const int hi = hex_value(component[i + 1]);
    const int lo = hex_value(component[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::string node_prefix(const OwnerToken& token, std::uint32_t capacity,
                        Kind kind) {
  std::string s = "q-" + token.to_string() + "-" + std::to_string(capacity);
  s.push_back('-');
  s.push_back(static_cast<char>(kind));
  s.push_back('-');
  return s;
}

std::optional<NodeName> parse_node_name(std::string_view child) {
  // q-<32 hex>-<cap>-<k>-<10 digits>
  if (child.size() < 2 + 32 + 1 + 1 + 1 + 1 + 1 + 10 ||
      child.substr(0, 2) != "q-" || child[34] != '-') {
    return std::nullopt;
  }
  NodeName n;
  n.child = std::string(child);
  auto tok = OwnerToken::parse(child.substr(2, 32));
  if (!tok.ok()) return std::nullopt;
  n.token = *tok;
  std::string_view rest = child.substr(35);  // <cap>-<k>-<seq>
  const auto dash = rest.find('-');
  if (dash == std::string_view::npos || dash + 3 > rest.size() ||
      rest[dash + 2] != '-') {
    return std::nullopt;
  }
  if (!parse_number(rest.substr(0, dash), &n.capacity) || n.capacity == 0) {
    return std::nullopt;
  }
  const char k = rest[dash + 1];
  if (k != 'b' && k != 's' && k != 'a' && k != 'r') return std::nullopt;
  n.kind = static_cast<Kind>(k);
  if (!parse_number(rest.substr(dash + 3), &n.seq)) return std::nullopt;
  return n;
}

std::string encode(const NodeData& d) {
  std::string s = "st=";
  s.push_back(static_cast<char>(d.state));
  s += "\nttl=" + std::to_string(d.ttl_ms);
  s += "\nholds=" + std::to_string(d.holds);
  if (d.fencing != 0) s += "\nf=" + std::to_string(d.fencing);
  if (!d.reentrancy_key.empty()) s += "\nrk=" + escape(d.reentrancy_key);
  if (!d.aliases.empty()) {
    s += "\nal=";
    for (std::size_t i = 0; i < d.aliases.size(); ++i) {
      if (i > 0) s.push_back(',');
      s += d.aliases[i].to_string();
    }
  }
  s += "\nlabel=" + d.label;  // last: the rest of the data
  return s;
}

std::optional<NodeData> decode(std::string_view data) {
  NodeData d;
  bool have_state = false;
  while (!data.empty()) {
    const auto eq = data.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view key = data.substr(0, eq);
    if (key == "label") {
      d.label = std::string(data.substr(eq + 1));
      break;
    }
    auto nl = data.find('\n', eq);
    if (nl == std::string_view::npos) nl = data.size();
    const std::string_view value = data.substr(eq + 1, nl - eq - 1);
    data.remove_prefix(std::min(nl + 1, data.size()));
    if (key == "st") {
      if (value != "h" && value != "w" && value != "s") return std::nullopt;
      d.state = static_cast<State>(value[0]);
      have_state = true;
    } else if (key == "ttl") {
      if (!parse_number(value, &d.ttl_ms)) return std::nullopt;
    } else if (key == "holds") {
      if (!parse_number(value, &d.holds)) return std::nullopt;
    } else if (key == "f") {
      if (!parse_number(value, &d.fencing)) return std::nullopt;
    } else if (key == "rk") {
      auto k = unescape(value);
      if (!k) return std::nullopt;
      d.reentrancy_key = *k;
    } else if (key == "al") {
      std::string_view rest = value;
      while (!rest.empty()) {
        const auto comma = rest.find(',');
        auto t = OwnerToken::parse(rest.substr(0, comma));
        if (!t.ok()) return std::nullopt;
        d.aliases.push_back(*t);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
    }  // unknown keys: written by a later version; ignored
  }
  if (!have_state) return std::nullopt;
  return d;
}

}  // namespace baton::store::zk
