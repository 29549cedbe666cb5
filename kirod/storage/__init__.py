"""The SQLite store: one file, one connection, one writer; sqlite errors never leave here."""
