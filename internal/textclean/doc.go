// Package textclean turns terminal output into plain text an agent can read.
//
// Programs write for terminals: colours and hyperlinks as escape sequences,
// progress bars redrawn in place with carriage returns, bold and underline
// as backspace overstrikes. Shown to a language model as is, that is noise
// that costs tokens and hides the answer. Clean renders each line the way a
// terminal would leave it and keeps only the text:
//
//   - ANSI escape sequences (CSI, OSC, DCS, SOS/PM/APC and two-byte ESC
//     sequences, in their 7-bit and UTF-8 encoded C1 forms) are removed;
//     an incomplete sequence at the very end is dropped.
//   - A carriage return moves back to the start of the line, so
//     "10%\r20%\r30%\n" reads "30%\n"; "\r\n" is a plain newline.
//   - Backspace moves back one column, so overstrikes ("_\bx", "x\bx") read
//     as the last character written.
//   - The line-editing sequences progress bars and line editors rely on
//     are honoured: erase in line (CSI K), cursor to column (CSI G),
//     cursor forward and back (CSI C, CSI D), erase and delete characters
//     (CSI X, CSI P). Other cursor movement (up, down, absolute position) is
//     dropped, because following it would need a whole screen; each line is
//     kept where it was written.
//   - Other control characters are dropped; newline and tab stay.
//   - Bidirectional controls and zero-width characters (Invisible), which
//     a terminal does not show but which reorder or disguise the text,
//     are written as \uNNNN escapes (\u202e, \u200b).
//   - Invalid UTF-8 becomes U+FFFD.
//
// The result is idempotent: Clean(Clean(x)) == Clean(x). A Cleaner does the
// same work incrementally, so output read page by page, or followed as it
// is written, cleans exactly as if it had been read in one piece.
package textclean
