"""The credential lifecycle: token refresh (social, IdC, external IdP), device-code login, API
regions, and importers of other tools' token stores."""
