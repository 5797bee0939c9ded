"""Optional integrations with third-party packages, each imported only when used."""
