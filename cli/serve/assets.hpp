// The dashboard's page, script and style sheet, compiled into the tool so that it serves
// everything itself (no CDN; it works offline). assets/: one file each.
#pragma once

#include <string>
#include <string_view>

namespace pgqueue_cli::dashboard {

/// The page. With a `token` (started with --allow-actions) it carries it in
/// <meta name="pgqueue-token">, and the script shows the buttons; without, it has neither.
std::string page_html(const std::string& token);

/// The page's script: polls /api/dashboard, builds the tables and the chart with DOM calls
/// (textContent, never innerHTML: a queue name or an error is text, whatever it contains).
extern const std::string_view app_js;

extern const std::string_view app_css;

}  // namespace pgqueue_cli::dashboard
