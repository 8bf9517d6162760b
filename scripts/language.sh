# Sourced by bootstrap.sh and test.sh: which language their messages take, and say() to print one.
# The CLI's language rule (cnki_mcp.setup.cli_words.language), in bash 3.2 (macOS) terms: Chinese, English with
# CNKI_LANG=en, or with CNKI_LANG unset, an English LC_ALL/LC_MESSAGES/LANG (the first one set decides).
english=0
chosen=${CNKI_LANG:-}
chosen=${chosen#"${chosen%%[![:space:]]*}"}
if [ -n "$chosen" ]; then
  case "$chosen" in [Ee][Nn]*) english=1 ;; esac
else
  for locale in "${LC_ALL:-}" "${LC_MESSAGES:-}" "${LANG:-}"; do
    locale=${locale#"${locale%%[![:space:]]*}"}
    [ -n "$locale" ] || continue
    case "$locale" in [Ee][Nn]*) english=1 ;; esac
    break
  done
fi

# The Chinese line, or the English one.
say() {
  if [ "$english" = 1 ]; then printf '%s\n' "$2"; else printf '%s\n' "$1"; fi
}
