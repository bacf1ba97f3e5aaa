#include "scheduler/queue_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tarn::scheduler {

// Readable failure messages (found by ADL; internal linkage so no other test file clashes).
[[maybe_unused]] static void PrintTo(const QueueConfig& q, std::ostream* os) {
  *os << "{name: \"" << q.name << "\", guaranteed_share: " << q.guaranteed_share
      << ", maximum_share: " << q.maximum_share
      << ", acl_submit_applications: " << (q.submit_acl ? q.submit_acl->ToString() : "(none)")
      << ", acl_administer_queue: "
      << (q.administer_acl ? q.administer_acl->ToString() : "(none)")
      << ", default-application-priority: " << q.default_priority
      << ", max-application-priority: " << q.max_priority << "}";
}

namespace {

using nlohmann::json;

// Parses `queues` and expects an INVALID_ARGUMENT error whose message contains every part.
void ExpectError(const json& queues, const std::vector<std::string>& parts) {
  auto parsed = ParseQueues(queues);
  ASSERT_FALSE(parsed.ok()) << "parsed " << queues.dump();
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  for (const std::string& part : parts) {
    EXPECT_NE(parsed.status().message().find(part), std::string::npos)
        << "message \"" << parsed.status().message() << "\" lacks \"" << part << "\"";
  }
}

// With no queue configured, the implicit default is guaranteed the whole cluster.
const QueueConfig kDefault{"default", 1, 1, {}, {}};

TEST(ParseQueuesTest, NullGivesOnlyTheDefaultQueue) {
  auto parsed = ParseQueues(json());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 1u);
  EXPECT_EQ((*parsed)[0], kDefault);
  EXPECT_TRUE((*parsed)[0].Allows("anyone"));
}

TEST(ParseQueuesTest, EmptyListGivesOnlyTheDefaultQueue) {
  auto parsed = ParseQueues(json::array());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 1u);
  EXPECT_EQ((*parsed)[0], kDefault);
}

TEST(ParseQueuesTest, YarnNamesArePercentagesAndAclIsAUserList) {
  json queues = json::parse(R"([
    {"name": "gpu-team", "capacity": 40, "maximum-capacity": 60,
     "acl_submit_applications": "alice,bob"}
  ])");
  auto parsed = ParseQueues(queues);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 2u);
  const QueueConfig& q = (*parsed)[0];
  EXPECT_EQ(q.name, "gpu-team");
  EXPECT_DOUBLE_EQ(q.guaranteed_share, 0.4);
  EXPECT_DOUBLE_EQ(q.maximum_share, 0.6);
  ASSERT_TRUE(q.submit_acl.has_value());
  EXPECT_EQ(q.submit_acl->users, (std::vector<std::string>{"alice", "bob"}));
  EXPECT_FALSE(q.administer_acl.has_value());
  // "default" is appended after the configured queues, guaranteed the 60% they leave.
  EXPECT_EQ((*parsed)[1].name, "default");
  EXPECT_DOUBLE_EQ((*parsed)[1].guaranteed_share, 0.6);
  EXPECT_DOUBLE_EQ((*parsed)[1].maximum_share, 1.0);
}

TEST(ParseQueuesTest, FractionalPercentages) {
  auto parsed = ParseQueues(json::parse(R"([{"name": "a", "capacity": 12.5,
                                             "maximum-capacity": 37.5}])"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_DOUBLE_EQ((*parsed)[0].guaranteed_share, 0.125);
  EXPECT_DOUBLE_EQ((*parsed)[0].maximum_share, 0.375);
}

// An omitted maximum-capacity is the whole cluster (1.0), not 100.0: found by this test, when
// the default skipped the division by 100.
TEST(ParseQueuesTest, OmittedFieldsTakeDefaults) {
  auto parsed = ParseQueues(json::parse(R"([{"name": "batch"}])"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0], (QueueConfig{"batch", 0, 1, {}, {}}));
}

TEST(ParseQueuesTest, OmittedMaximumCapacityIsTheWholeCluster) {
  auto parsed = ParseQueues(json::parse(R"([{"name": "a", "capacity": 40}])"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_DOUBLE_EQ((*parsed)[0].guaranteed_share, 0.4);
  EXPECT_DOUBLE_EQ((*parsed)[0].maximum_share, 1.0);
}

TEST(ParseQueuesTest, BoundsZeroAndHundredAreAccepted) {
  auto parsed = ParseQueues(json::parse(R"([{"name": "all", "capacity": 100,
                                             "maximum-capacity": 100},
                                            {"name": "none", "capacity": 0,
                                             "maximum-capacity": 0}])"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 3u);
  EXPECT_EQ((*parsed)[0], (QueueConfig{"all", 1.0, 1.0, {}, {}}));
  EXPECT_EQ((*parsed)[1], (QueueConfig{"none", 0.0, 0.0, {}, {}}));
}

TEST(ParseQueuesTest, MaximumEqualToCapacityIsAccepted) {
  auto parsed =
      ParseQueues(json::parse(R"([{"name": "q", "capacity": 25, "maximum-capacity": 25}])"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_DOUBLE_EQ((*parsed)[0].guaranteed_share, 0.25);
  EXPECT_DOUBLE_EQ((*parsed)[0].maximum_share, 0.25);
}

TEST(ParseQueuesTest, StarAclMeansEveryone) {
  auto parsed = ParseQueues(json::parse(R"([{"name": "open", "acl_submit_applications": "*"}])"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE((*parsed)[0].submit_acl.has_value());
  EXPECT_TRUE((*parsed)[0].Allows("alice"));
  EXPECT_TRUE((*parsed)[0].Allows("mallory"));
}

TEST(ParseQueuesTest, AclSkipsEmptyNames) {
  auto parsed =
      ParseQueues(json::parse(R"([{"name": "q", "acl_submit_applications": ",alice,,bob,"}])"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ((*parsed)[0].submit_acl->users, (std::vector<std::string>{"alice", "bob"}));
}

TEST(ParseQueuesTest, SingleUserAcl) {
  auto parsed = ParseQueues(json::parse(R"([{"name": "q", "acl_submit_applications": "carol"}])"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ((*parsed)[0].submit_acl->users, (std::vector<std::string>{"carol"}));
}

// "research" omits maximum-capacity and gets the whole cluster.
TEST(ParseQueuesTest, ConfiguredDefaultIsKeptAndNotDuplicated) {
  auto parsed = ParseQueues(json::parse(R"([
    {"name": "default", "capacity": 30, "maximum-capacity": 50,
     "acl_submit_applications": "ops"},
    {"name": "research", "capacity": 70}
  ])"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0], (QueueConfig{"default", 0.3, 0.5, Acl{false, {"ops"}, {}}, {}}));
  EXPECT_EQ((*parsed)[1], (QueueConfig{"research", 0.7, 1.0, {}, {}}));
  EXPECT_FALSE((*parsed)[0].Allows("alice"));
}

TEST(ParseQueuesTest, CapacitiesSummingToExactlyHundredAreAccepted) {
  // Ten queues of 10%: the shares 0.1 do not add up to exactly 1.0 in binary.
  json queues = json::array();
  for (int i = 0; i < 10; ++i)
    queues.push_back({{"name", "q" + std::to_string(i)}, {"capacity", 10}});
  auto parsed = ParseQueues(queues);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->size(), 11u);
  EXPECT_EQ(parsed->back(), (QueueConfig{"default", 0, 1, {}, {}}));  // nothing is left for it
}

TEST(ParseQueuesTest, ValidNameCharacters) {
  std::string longest(64, 'a');
  auto parsed = ParseQueues(json::array({json{{"name", "a.b_c-9"}}, json{{"name", longest}}}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ((*parsed)[0].name, "a.b_c-9");
  EXPECT_EQ((*parsed)[1].name, longest);
}

TEST(ParseQueuesTest, NotAListIsAnError) {
  ExpectError(json::parse(R"({"name": "a"})"), {"queues", "expected a list"});
  ExpectError(json("a"), {"expected a list"});
}

TEST(ParseQueuesTest, EntryThatIsNotAnObjectIsAnError) {
  ExpectError(json::parse(R"([{"name": "a"}, "b"])"), {"queues[1]", "expected an object"});
}

// YARN's names: the priority of a launch that names none, and the highest one may name;
// both 0 when absent (so nobody outranks anybody unless the operator says).
TEST(ParseQueuesTest, PrioritiesAreTheDefaultAndTheMaximumALaunchMayName) {
  auto parsed = ParseQueues(json::parse(
      R"([{"name": "urgent", "default-application-priority": 2, "max-application-priority": 10},
          {"name": "low", "default-application-priority": -5, "max-application-priority": -1}])"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ((*parsed)[0].default_priority, 2);
  EXPECT_EQ((*parsed)[0].max_priority, 10);
  EXPECT_EQ((*parsed)[1].default_priority, -5);
  EXPECT_EQ((*parsed)[1].max_priority, -1);
  EXPECT_EQ((*parsed)[2].name, "default");
  EXPECT_EQ((*parsed)[2].default_priority, 0);
  EXPECT_EQ((*parsed)[2].max_priority, 0);
  ExpectError(json::parse(R"([{"name": "a", "default-application-priority": 3}])"),
              {"queues[0].default-application-priority", "3 is above the queue's "
                                                         "max-application-priority (0)"});
  ExpectError(json::parse(R"([{"name": "a", "max-application-priority": "high"}])"),
              {"queues[0].max-application-priority", "expected an integer", "\"high\""});
  ExpectError(json::parse(R"([{"name": "a", "max-application-priority": 1.5}])"),
              {"queues[0].max-application-priority", "expected an integer"});
  ExpectError(json::parse(R"([{"name": "a", "max-application-priority": 2000000000}])"),
              {"queues[0].max-application-priority", "from -1000000000 to 1000000000"});
}

// YARN's per-queue switch: the queue's running work is never preempted.
TEST(ParseQueuesTest, DisablePreemptionIsABoolean) {
  auto parsed = ParseQueues(json::parse(
      R"([{"name": "prod", "disable_preemption": true}, {"name": "batch"}])"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE((*parsed)[0].disable_preemption);
  EXPECT_FALSE((*parsed)[1].disable_preemption);
  ExpectError(json::parse(R"([{"name": "a"}, {"name": "b", "disable_preemption": "yes"}])"),
              {"queues[1].disable_preemption", "expected true or false", "\"yes\""});
}

TEST(ParseQueuesTest, UnknownFieldIsAnError) {
  ExpectError(json::parse(R"([{"name": "a", "capcity": 10}])"),
              {"queues[0].capcity", "unknown field"});
  ExpectError(json::parse(R"([{"name": "a"}, {"name": "b", "maxCapacity": 10}])"),
              {"queues[1].maxCapacity", "unknown field"});
}

TEST(ParseQueuesTest, BadNamesAreErrors) {
  for (const json& name : {json(""), json("GPU"), json("a b"), json("a/b"), json("ü"),
                           json(std::string(65, 'a')), json(7), json(nullptr)}) {
    SCOPED_TRACE(name.dump());
    ExpectError(json::array({json{{"name", name}}}), {"queues[0].name", "expected a queue name"});
  }
  ExpectError(json::parse(R"([{"capacity": 10}])"), {"queues[0].name", "expected a queue name"});
}

TEST(ParseQueuesTest, DuplicateNameIsAnError) {
  ExpectError(json::parse(R"([{"name": "a"}, {"name": "b"}, {"name": "a"}])"),
              {"queues[2].name", "\"a\"", "defined twice"});
  ExpectError(json::parse(R"([{"name": "default"}, {"name": "default"}])"),
              {"queues[1].name", "\"default\"", "defined twice"});
}

TEST(ParseQueuesTest, CapacityOutOfRangeOrNotANumberIsAnError) {
  for (const json& value : {json(-1), json(100.5), json(101), json("40"), json(true), json(nullptr),
                            json::array({40})}) {
    SCOPED_TRACE(value.dump());
    ExpectError(json::array({json{{"name", "a"}, {"capacity", value}}}),
                {"queues[0].capacity", "expected a percentage from 0 to 100"});
    ExpectError(json::array({json{{"name", "a"}, {"maximum-capacity", value}}}),
                {"queues[0].maximum-capacity", "expected a percentage from 0 to 100"});
  }
}

TEST(ParseQueuesTest, MaximumBelowCapacityIsAnError) {
  ExpectError(json::parse(R"([{"name": "a", "capacity": 50, "maximum-capacity": 40}])"),
              {"queues[0].maximum-capacity", "below its capacity"});
}

TEST(ParseQueuesTest, CapacitiesOverHundredAreAnError) {
  ExpectError(json::parse(R"([{"name": "a", "capacity": 60}, {"name": "b", "capacity": 50}])"),
              {"add up to 110%", "more than the whole cluster"});
  // A configured default counts too: 70 + 40 = 110.
  ExpectError(
      json::parse(R"([{"name": "a", "capacity": 70}, {"name": "default", "capacity": 40}])"),
      {"add up to 110%"});
  // 100.5% in all: over, even if by half a percent.
  ExpectError(json::parse(R"([{"name": "a", "capacity": 50.5}, {"name": "b", "capacity": 50}])"),
              {"capacities add up to"});
}

TEST(ParseQueuesTest, EmptyAclIsAnError) {
  ExpectError(json::parse(R"([{"name": "a", "acl_submit_applications": ""}])"),
              {"queues[0].acl_submit_applications", "names no user"});
  ExpectError(json::parse(R"([{"name": "a", "acl_submit_applications": ",,"}])"),
              {"queues[0].acl_submit_applications", "names no user"});
}

TEST(ParseQueuesTest, AclThatIsNotAStringIsAnError) {
  ExpectError(json::parse(R"([{"name": "a", "acl_submit_applications": ["alice"]}])"),
              {"queues[0].acl_submit_applications", "expected"});
}

TEST(ParseQueuesTest, AclsTakeUsersAndGroups) {
  auto parsed = ParseQueues(json::parse(R"([{"name": "q",
      "acl_submit_applications": "alice ml,ops", "acl_administer_queue": " leads"}])"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const QueueConfig& q = (*parsed)[0];
  EXPECT_TRUE(q.Allows("alice", {}));
  EXPECT_TRUE(q.Allows("carol", {"users", "ops"}));
  EXPECT_FALSE(q.Allows("carol", {"users"}));
  EXPECT_TRUE(q.Administers("dave", {"leads"}));
  EXPECT_FALSE(q.Administers("alice", {"ml"}));
  // Without acl_administer_queue nobody administers a queue.
  EXPECT_FALSE((*parsed)[1].Administers("root", {"root"}));
  ExpectError(json::parse(R"([{"name": "a", "acl_administer_queue": "a b c"}])"),
              {"queues[0].acl_administer_queue", "more than one space"});
}

TEST(QueueConfigTest, AllowsListedUsersOnly) {
  QueueConfig q{"q", 0, 1, Acl{false, {"alice", "bob"}, {}}, {}};
  EXPECT_TRUE(q.Allows("alice"));
  EXPECT_TRUE(q.Allows("bob"));
  EXPECT_FALSE(q.Allows("carol"));
  EXPECT_FALSE(q.Allows(""));
  EXPECT_FALSE(q.Allows("Alice"));  // user names are case-sensitive
  EXPECT_FALSE(q.Allows("alice,bob"));
}

TEST(QueueConfigTest, EmptyListAllowsEveryone) {
  QueueConfig q{"q", 0, 1, {}, {}};
  EXPECT_TRUE(q.Allows("alice"));
  EXPECT_TRUE(q.Allows(""));
}

}  // namespace
}  // namespace tarn::scheduler
