//! Redaction: what never reaches disk (filled in by the redaction work).
