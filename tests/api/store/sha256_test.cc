// SHA-256 against FIPS 180-2's examples (plus the padding boundaries, from Python's
// hashlib), HMAC-SHA256 against RFC 4231's test cases, and the constant-time compare.
#include "api/store/internal/sha256.h"

#include <gtest/gtest.h>

#include <string>

#include "api/process/job_identity.h"

namespace distcomm {
namespace {

std::string hex(const internal::Digest& d) { return hex_of(std::string(d.begin(), d.end())); }

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(hex(internal::sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(internal::sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(internal::sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(internal::sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundariesAndPiecewiseUpdates) {
  // 55 bytes leave room for the length in one block; 56 do not; 64 fill a block.
  EXPECT_EQ(hex(internal::sha256(std::string(55, 'a'))),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(hex(internal::sha256(std::string(56, 'a'))),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(hex(internal::sha256(std::string(64, 'a'))),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  internal::Sha256 h;
  const std::string text = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  for (size_t i = 0; i < text.size(); i += 7) h.update(text.substr(i, 7));
  EXPECT_EQ(hex(h.finish()), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(HmacSha256, Rfc4231TestCases) {
  EXPECT_EQ(hex(internal::hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(internal::hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex(internal::hmac_sha256(std::string(20, '\xaa'), std::string(50, '\xdd'))),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key;
  for (char c = 1; c <= 25; ++c) key.push_back(c);
  EXPECT_EQ(hex(internal::hmac_sha256(key, std::string(50, '\xcd'))),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Keys longer than a block are hashed first.
  const std::string long_key(131, '\xaa');
  EXPECT_EQ(hex(internal::hmac_sha256(long_key, "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(hex(internal::hmac_sha256(long_key,
                                      "This is a test using a larger than block-size key and a larger than "
                                      "block-size data. The key needs to be hashed before being used by the HMAC "
                                      "algorithm.")),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(ConstantTimeCompare, FindsADifferenceAnywhere) {
  const std::string a(32, 'x');
  for (size_t i = 0; i < a.size(); ++i) {
    std::string b = a;
    b[i] ^= 1;
    EXPECT_FALSE(internal::equal_in_constant_time(reinterpret_cast<const uint8_t*>(a.data()),
                                                  reinterpret_cast<const uint8_t*>(b.data()), a.size()))
        << i;
  }
  EXPECT_TRUE(internal::equal_in_constant_time(reinterpret_cast<const uint8_t*>(a.data()),
                                               reinterpret_cast<const uint8_t*>(a.data()), a.size()));
}

TEST(JobIdentity, FreshIdentitiesAreHexAndDiffer) {
  const JobIdentity a = new_job_identity(), b = new_job_identity();
  EXPECT_EQ(a.run_id.size(), 16u);
  EXPECT_EQ(a.token.size(), 64u);
  EXPECT_EQ(a.token.find_first_not_of("0123456789abcdef"), std::string::npos) << a.token;
  EXPECT_NE(a.run_id, b.run_id);
  EXPECT_NE(a.token, b.token);
}

}  // namespace
}  // namespace distcomm
