"""Process settings, the exception tree and the clock: the bottom layer every package may import."""
