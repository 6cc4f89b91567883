#pragma once
// The receipt commands of sparkglm-qualify. Each takes the arguments after its name, writes what
// it did to `out` and each problem to `err`, and returns the exit status: 0 done, 1 the bundle or
// the receipts folder does not verify (or signing was refused), 2 bad arguments or an I/O error.
#include <ostream>
#include <string>
#include <vector>

namespace sparkglm::receipts {

// verify BUNDLE [--pubkey KEY]   (KEY: a PEM public key file, KEY.pub, or base64 text)
int verify_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// verify-all [--receipts DIR]    (default: receipts/ in the working directory)
int verify_all_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// index [--receipts DIR]
int index_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// sign BUNDLE --key KEY.pem [--by NAME]   (NAME defaults to $USER)
int sign_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// keygen --out KEY.pem   (writes KEY.pem, mode 0600, and KEY.pub, the base64 public key)
int keygen_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace sparkglm::receipts
