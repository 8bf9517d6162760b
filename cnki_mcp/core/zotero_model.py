"""What save_to_zotero says of a record's note (beside the model: core/model.py is near its size limit)."""

from __future__ import annotations

import msgspec


class ZoteroNote(msgspec.Struct, omit_defaults=True, kw_only=True):
    """One record's note in save_to_zotero: stored as the item's child note, or why not."""

    status: str  # stored | not_stored
    message: str = ""
