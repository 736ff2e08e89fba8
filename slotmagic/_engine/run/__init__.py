"""Running a turn: the engine, the stream and its effects, the tool loop and its requests, the
reply, a fan-out's columns, and what runs beside a turn (a background loop, warming up)."""
