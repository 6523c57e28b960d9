//! Every limit the server enforces on what it is sent or keeps, in one place: the README's
//! limits table lists the same, each with its flag where a user may need to raise it. Limits
//! with a flag hold the default here; `config` carries the chosen value.
