// The anti-forgery token of `pgqueue serve --allow-actions`: random per start, put into the
// page, and required in the X-PGQueue-Token header of every action. Another site's page can
// make a browser send a request to the dashboard, but cannot read the page to learn the token.
#pragma once

#include <string>
#include <string_view>

namespace pgqueue_cli::dashboard {

/// 32 random bytes from the kernel (getrandom), as 64 hex digits. Throws when the kernel
/// gives none.
std::string make_token();

/// Whether `given` equals `expected`, in time that depends on their lengths only (not on
/// where they first differ), so that timing tells an attacker nothing about the token.
bool same_token(std::string_view given, std::string_view expected);

}  // namespace pgqueue_cli::dashboard
