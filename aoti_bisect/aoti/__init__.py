"""What aoti-bisect knows about AOTInductor: the guide's flags, and pure parsers of what AOTI prints and generates."""
