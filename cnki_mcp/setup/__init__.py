"""Setting the product up on a machine: the wizard, the 27 clients and their config files
(``clients``, ``config_edit``, ``client_cli``), and ``doctor``.

May import: serving, surface, app and everything below them.
"""
