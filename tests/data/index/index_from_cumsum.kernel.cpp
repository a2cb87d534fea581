// Triton kernels are embedded as comments in /tmp/torchinductor_root/cocmuyfxsx7lhlevf7bdjw3ycwayotlxapbarhrx45tz3tzsrkv3/cptkeerpjn7lfxg6f7xdzqgglm7zzm4lpq3srufhc2ck34xvaut7.wrapper.cpp

#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  cpp_fused_add_embedding_0(const int64_t* in_ptr0,
                       const float* in_ptr1,
                       const int64_t* in_ptr2,
                       const float* in_ptr3,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(48L); x0+=static_cast<int64_t>(1L))
        {
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(8L); x1+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x1 >= static_cast<int64_t>(0L) && x1 < static_cast<int64_t>(8L)))
                    {
                        auto tmp0 = in_ptr0[static_cast<int64_t>(x0)];
                        auto tmp5 = in_ptr2[static_cast<int64_t>(x0)];
                        auto tmp1 = tmp0;
                        auto tmp2 = c10::convert<int64_t>(tmp1);
                        AOTI_TORCH_CHECK((0 <= tmp2) & (tmp2 < 100L), "index out of bounds: 0 <= tmp2 < 100L");
                        auto tmp4 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 8L*tmp0), static_cast<int64_t>(8L));
                        auto tmp6 = tmp5;
                        auto tmp7 = c10::convert<int64_t>(tmp6);
                        AOTI_TORCH_CHECK((0 <= tmp7) & (tmp7 < 16L), "index out of bounds: 0 <= tmp7 < 16L");
                        auto tmp9 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 8L*tmp5), static_cast<int64_t>(8L));
                        auto tmp10 = tmp4 + tmp9;
                        tmp10.store(out_ptr0 + static_cast<int64_t>(x1 + 8L*x0), static_cast<int64_t>(8L));
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}

