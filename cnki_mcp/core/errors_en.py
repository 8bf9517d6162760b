"""The English of the errors a terminal shows in English (the CLI with ``CNKI_LANG=en``, ``doctor --site``).

The catalogue (errors.py) and every message a tool writes are Chinese, whatever the locale: the assistant reads them.
Setup localises its own errors where it raises them; the errors below come from the layers under it (the field
check's blocked steps, config.json, settings, the store, the data directory, the HTTP endpoint). Each line says what
happened and what to do; ``english_message`` adds the details that carry no Chinese (a path, a reason, a value). An
error without a line here keeps its Chinese message and says so: never a silent switch of language.
"""

from __future__ import annotations

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Problem
from cnki_mcp.core.text import has_han

ERRORS_EN: dict[str, str] = {
    # The field check's blocked steps: the cause lies on this machine, its network or the login.
    "NETWORK_UNREACHABLE": "CNKI cannot be reached (network, name lookup, proxy, or its CDN refuses this network).",
    "BROWSER_UNAVAILABLE": ("the browser connection is not available (not a lack of access): run the check again; on a machine "
                            "without a screen, run it in a desktop session."),
    "BROWSER_NOT_FOUND": "no Chrome, Edge or Chromium was found: run cnki-mcp setup --browser <browser path>.",
    "BROWSER_PROFILE_IN_USE": "another browser uses the dedicated profile: close that window and try again.",
    "DATA_DIRECTORY_IN_USE": "another MCP server process uses this data directory.",
    "RESOURCE_FAILED": "the browser did not get the page (network error or time-out; not a lack of access).",
    "LOGIN_REQUIRED": "CNKI asks for a login: log in in the browser window, then run the check again.",
    "LOGIN_TIMEOUT": "the login was not finished within 20 minutes.",
    "ACCESS_DENIED": "CNKI refused access (no rights with this login).",
    "VERIFICATION_REQUIRED": "CNKI asks for a human check: pass it in the browser window.",
    "VERIFICATION_SKIPPED": "a page that asks for a human check was skipped.",
    "VERIFICATION_TIMEOUT": "the human check was not passed within 20 minutes.",
    "VERIFICATION_REPEATED": "CNKI kept asking for checks after one was passed: wait a while, then try again.",
    "RATE_LIMITED": "CNKI limits the request rate (HTTP 429): try again later.",
    "SITE_UNAVAILABLE": "CNKI is unavailable for now (HTTP 5xx): try again later.",
    "SITE_TEMPORARILY_EMPTY": "CNKI returns only empty results for now (usually throttling): try again later.",
    "BUDGET_EXHAUSTED": "the check's requests were used up before this step.",
    # Settings and config.json.
    "CONFIG_INVALID": "config.json cannot be read: correct the file or delete it, then try again.",
    "CONFIG_ROUTE_REFUSED": ("the university VPN (remote access) entry saved in config.json is not a usable gateway, so CNKI is "
                             "reached directly: log in through the VPN again (login with remote_access_url) or run "
                             "cnki-mcp setup --remote-access <URL>; remove config.json's route entry if you no longer use it."),
    "INVALID_SETTING": "a setting (an environment variable or config.json) has an invalid value: correct it and try again.",
    # The data directory and its files.
    "STORE_UNAVAILABLE": "the local data cannot be read or written: check the data directory's permissions and free space.",
    "STORE_CORRUPT": ("reading the local database research.db failed (a damaged file or a failing disk): back it up with "
                      "cnki-mcp store --dump, then start the server again; its start checks the database, keeps a damaged "
                      "file under a new name and moves what can be read into a new one."),
    "STORE_SET_ASIDE": ("the local data (research.db, or an older version's research.json) could not be read: it was kept "
                        "under a new name, nothing deleted, and this run starts from empty local data."),
    "STORE_NOT_SAVED": ("recent changes could not be written to research.db and are only in memory; the server keeps "
                        "trying: free disk space or check the data directory's permissions, and do not stop the server "
                        "until it has saved, or the changes are lost."),
    "STORE_ENTRIES_DROPPED": ("some entries of the local data could not be read and were skipped; the rest loaded as usual "
                              "and a copy of the original file was kept."),
    "DISK_WRITE_FAILED": "a file could not be written: check free space and permissions, then try again.",
    "FILE_EXISTS": "a file of that name already exists; nothing was overwritten.",
    "INVALID_FILENAME": "the file name is not valid.",
    "UNSAFE_OUTPUT_PATH": "the output path is not safe: only the data directory is written to.",
    # Serving.
    "HTTP_ADDRESS_UNAVAILABLE": ("cannot listen on this address and port: choose another port (--port, 0 picks a free one) "
                                 "or address (--host)."),
    "OWNER_UNREACHABLE": ("another cnki-mcp process owns the data directory but cannot be reached: try again later, end that "
                          "process, or set CNKI_DATA_DIR to another folder."),
    "OWNER_CHANGED": "the process that owned the data directory ended and another took over: run the command again.",
}

# Details shown after an English line: none that could hold Chinese (a setting's name is in ``name``).
SHOWN_DETAILS = ("path", "name", "value", "reason", "host", "port", "owner_pid", "version", "supported_version")
CHINESE_ONLY = " (this error's message exists in Chinese only)"


def english_message(error: CnkiError | Problem) -> str:
    """``error`` in English: a message without Chinese as it is (setup's own are English already), else the code's
    line and its Chinese-free details, else the Chinese message said to be that."""
    if not has_han(error.message):
        return error.message
    line = ERRORS_EN.get(error.code)
    if line is None:
        return error.message + CHINESE_ONLY
    details = error.details if isinstance(error.details, dict) else {}
    shown = [f"{key}: {details[key]}" for key in SHOWN_DETAILS
             if details.get(key) not in (None, "") and not has_han(str(details[key]))]
    return f"{line} ({'; '.join(shown)})" if shown else line
