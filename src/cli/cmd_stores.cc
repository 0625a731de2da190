// cli/cmd_stores.cc — `baton stores [SCHEME] [--json]`: the stores built into
// this binary and the options of their URLs, read from each store's
// descriptor (baton/store_descriptor.h), so the help cannot drift from the
// parser that checks the URL.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "baton/store_descriptor.h"
#include "cli/cli.h"

namespace baton::cli {
namespace {

struct StoresFlags {
  std::string scheme;
  bool json = false;
};

const char* type_name(OptionType t) {
  switch (t) {
    case OptionType::duration:
      return "duration";
    case OptionType::count:
      return "count";
    case OptionType::flag:
      return "flag";
    case OptionType::text:
      return "text";
    case OptionType::choice:
      return "choice";
    case OptionType::file:
      return "file";
    case OptionType::secret:
      return "secret";
  }
  return "text";
}

std::string lower(std::string s) {
  for (auto& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

bool has_scheme(const StoreDescriptor& d, const std::string& scheme) {
  for (const auto& s : d.schemes) {
    if (s == scheme) return true;
  }
  return false;
}

std::string joined(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

void print_text(const StoreDescriptor& d) {
  std::cout << d.name << " — " << d.summary << "\n  " << d.url_form << '\n';
  if (d.schemes.size() > 1) {
    std::cout << "  schemes: " << joined(d.schemes, ", ") << '\n';
  }
  for (const OptionSpec& o : d.options) {
    std::cout << "  " << o.key << " (" << type_name(o.type);
    if (o.type == OptionType::choice) {
      std::cout << ": " << joined(o.choices, "|");
    }
    if (!o.default_value.empty()) std::cout << ", default " << o.default_value;
    std::cout << ")  " << o.help << '\n';
  }
}

std::string json_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += (i ? "," : "") + json_string(items[i]);
  }
  return out + "]";
}

std::string json_line(const StoreDescriptor& d) {
  std::string out = "{\"name\":" + json_string(d.name) +
                    ",\"schemes\":" + json_list(d.schemes) +
                    ",\"summary\":" + json_string(d.summary) +
                    ",\"url_form\":" + json_string(d.url_form) +
                    ",\"options\":[";
  for (std::size_t i = 0; i < d.options.size(); ++i) {
    const OptionSpec& o = d.options[i];
    out += std::string(i ? "," : "") + "{\"key\":" + json_string(o.key) +
           ",\"type\":\"" + type_name(o.type) +
           "\",\"default\":" + json_string(o.default_value) +
           ",\"help\":" + json_string(o.help);
    if (!o.choices.empty()) out += ",\"choices\":" + json_list(o.choices);
    if (!o.aliases.empty()) out += ",\"aliases\":" + json_list(o.aliases);
    out += "}";
  }
  return out + "]}";
}

int show_stores(const StoresFlags& flags) {
  std::string scheme = lower(flags.scheme);
  while (!scheme.empty() && (scheme.back() == '/' || scheme.back() == ':')) {
    scheme.pop_back();
  }
  std::vector<StoreDescriptor> shown;
  for (auto& d : store_descriptors()) {
    if (scheme.empty() || has_scheme(d, scheme)) shown.push_back(d);
  }
  if (shown.empty()) {
    return report(Errc::invalid_argument,
                  "no store with scheme \"" + flags.scheme +
                      "\" is built into this binary (baton stores lists them)");
  }
  for (std::size_t i = 0; i < shown.size(); ++i) {
    if (flags.json) {
      std::cout << json_line(shown[i]) << '\n';
    } else {
      if (i) std::cout << '\n';
      print_text(shown[i]);
    }
  }
  return kExitOk;
}

}  // namespace

Command add_stores_command(CLI::App& app) {
  auto flags = std::make_shared<StoresFlags>();
  CLI::App* sub = app.add_subcommand(
      "stores",
      "List the stores built in, their URL forms and every URL option with "
      "its type, default and meaning (of one store when a scheme is given).");
  sub->add_option("scheme", flags->scheme,
                  "Only this store (e.g. postgres, redis://)");
  sub->add_flag("--json", flags->json, "One JSON object per store");
  return {sub, [flags] { return show_stores(*flags); }};
}

}  // namespace baton::cli
